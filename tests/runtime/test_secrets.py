"""Secrets the model never sees and keys that never reach disk: real runs, grepped."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest

from linewise.cli.flags import settings_from_args
from linewise.cli.main import build_parser
from linewise.runtime.models.chat import ChatClient
from linewise.runtime.redaction import API_KEY_PLACEHOLDER, REDACTOR, Redactor
from linewise.runtime.run import run_tasks
from linewise.runtime.secrets import Secret, SecretStore
from linewise.runtime.tasks.schema import WebTask
from linewise.settings import EndpointSettings, LinewiseSettings, SecretSpec
from linewise.testing import ScriptedChatServer, StaticServer, bid_matching, prompt_section
from tests.support.cli import linewise

SECRET = 'pa55-Wörd!x7"q'
"""Non-ASCII and a quote: JSON escapes them, so a plain search of the JSON text would
miss a leak; ``leaked_forms`` covers the escaped and URL-encoded forms too."""

PLACEHOLDER = "<secret:password>"


def leaked_forms(value: str) -> list[bytes]:
    """``value`` as written, JSON-escaped, quoted as in the AXTree's lines (``\\'``), and
    as Python, ``encodeURIComponent`` and a browser's form encoding (space as ``+``,
    ``~ ! ' ( )`` escaped) percent-encode it."""
    form = "".join(
        c if (c.isascii() and c.isalnum()) or c in "*-._" else "+" if c == " "
        else "".join(f"%{b:02X}" for b in c.encode()) for c in value
    )
    forms = {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1],
             quote(value, safe=""), quote_plus(value), quote(value, safe="~*!'()"), form,
             value.replace("'", "\\'"), repr(value)[1:-1]}
    forms |= {json.dumps(form)[1:-1] for form in forms}  # as a JSON record holds them
    return [form.encode() for form in forms]


def grep_folder(folder: Path, value: str) -> list[str]:
    """Every file under ``folder`` that holds ``value`` in any form."""
    hits = []
    for path in folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            if any(form in data for form in leaked_forms(value)):
                hits.append(str(path.relative_to(folder)))
    return hits


@pytest.fixture(autouse=True)
def fresh_redactor() -> Iterator[None]:
    REDACTOR.clear()
    yield
    REDACTOR.clear()


def login_script(messages: list[dict[str, Any]], secret: str = PLACEHOLDER) -> str:
    """Types ``secret`` into the text field, then the password field, submits, and
    reports once the page echoes what it received."""
    prompt = messages[1]["content"]
    tree = prompt_section(prompt, "Current page")
    history = prompt_section(prompt, "History of your previous steps")
    fills = history.count("fill(")
    if fills < 2:
        field = bid_matching(tree, "textbox 'User'" if fills == 0 else "textbox 'Password'")
        return f"<action>fill('{field}', '{secret}')</action>"
    if "Echo:" not in tree:
        button = bid_matching(tree, "button 'Sign in'")
        return f"<action>click('{button}')</action>"
    return "<action>send_msg_to_user('signed in')</action>"


def write_task_file(path: Path, url: str, domains: list[str] | None = None) -> Path:
    secret: dict[str, Any] = {"env": "SITE_PASSWORD"}
    if domains is not None:
        secret["domains"] = domains
    task = {"id": "login", "url": url, "goal": f"Sign in with the password {PLACEHOLDER}.",
            "max_steps": 6, "secrets": {"password": secret}}
    path.write_text(json.dumps({"tasks": [task]}), encoding="utf-8")
    return path


@dataclass
class SignIn:
    """A ``linewise run`` that signed in: its folder, episode, output and prompts."""

    folder: Path
    episode: Path
    result: subprocess.CompletedProcess[str]
    prompts: list[str]

    def assert_never_leaked(self, value: str) -> None:
        assert grep_folder(self.folder, value) == []
        for text in (self.result.stdout, self.result.stderr, *self.prompts):
            assert not any(form.decode() in text for form in leaked_forms(value))


def sign_in(script: Callable[[list[dict[str, Any]]], str], tmp_path: Path, *args: str,
            env: dict[str, str] | None = None) -> SignIn:
    """``linewise run ARGS`` against a scripted model; it must end signed in."""
    folder = tmp_path / "run"
    with ScriptedChatServer(script) as llm:
        result = linewise(
            "run", *args, "--base-url", llm.base_url, "--model", "scripted",
            "--out", str(folder), "--log-json", "--log-level", "DEBUG", env=env,
        )
        prompts = [json.dumps(r["messages"], ensure_ascii=False) for r in llm.requests]
    assert result.returncode == 0, result.stderr
    [episode] = [p for p in folder.iterdir() if p.is_dir()]
    summary = json.loads((episode / "summary.json").read_text())
    assert summary["answer"] == "signed in", summary
    return SignIn(folder, episode, result, prompts)


@pytest.mark.slow
def test_a_typed_secret_reaches_the_page_and_nothing_else(
    pages: StaticServer, tmp_path: Path
) -> None:
    tasks = write_task_file(tmp_path / "tasks.yaml", pages.url("login.html"))
    run = sign_in(login_script, tmp_path, str(tasks), env={"SITE_PASSWORD": SECRET})
    episode, prompts = run.episode, run.prompts
    # The page received the value in both fields: it echoed it, and the model read the
    # echo with each value replaced by its placeholder.
    echo = f"Echo: {PLACEHOLDER} / {PLACEHOLDER}"
    assert any(echo in p for p in prompts)
    assert any(echo in line for line in (episode / "steps.jsonl").read_text().splitlines())
    assert list((episode / "screenshots").glob("*.png"))  # screenshots were taken
    run.assert_never_leaked(SECRET)


@pytest.mark.slow
def test_a_secret_marked_in_the_goal_is_typed_and_never_recorded(
    pages: StaticServer, tmp_path: Path
) -> None:
    goal = f"Sign in as the user and password {{{{secret:{SECRET}}}}}."
    run = sign_in(lambda m: login_script(m, "<secret:goal_1>"), tmp_path,
                  "--url", pages.url("login.html"), "--goal", goal)
    assert "Sign in as the user and password <secret:goal_1>." in run.prompts[0]
    assert any("Echo: <secret:goal_1> / <secret:goal_1>" in p for p in run.prompts)
    assert "<secret:goal_1>" in (run.folder / "run.json").read_text()
    run.assert_never_leaked(SECRET)


@pytest.mark.slow
def test_a_secret_marked_in_a_task_files_goal_is_typed_and_never_recorded(
    pages: StaticServer, tmp_path: Path
) -> None:
    """A task file's goal is read as ``--goal`` is: before, ``{{secret:…}}`` stayed in it
    as written, and the value reached the prompts, the steps, the summary and stderr."""
    goal = f"Sign in as the user and password {{{{secret:{SECRET}}}}}."
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(json.dumps({"tasks": [
        {"id": "login", "url": pages.url("login.html"), "goal": goal, "max_steps": 6}]}))
    run = sign_in(lambda m: login_script(m, "<secret:goal_1>"), tmp_path, str(tasks))
    assert "Sign in as the user and password <secret:goal_1>." in run.prompts[0]
    assert any("Echo: <secret:goal_1> / <secret:goal_1>" in p for p in run.prompts)
    summary = json.loads((run.episode / "summary.json").read_text())
    assert summary["task"]["goal"] == "Sign in as the user and password <secret:goal_1>."
    run.assert_never_leaked(SECRET)


def test_a_marked_value_elsewhere_in_a_task_file_is_refused(tmp_path: Path) -> None:
    from linewise.errors import TaskFileError
    from linewise.runtime.tasks.loader import load_task_file

    tasks = tmp_path / "tasks.yaml"
    for task in [{"id": "a", "url": "http://x.test/", "goal": "g",
                  "success": {"answer_contains": "{{secret:hunter2}}"}},
                 {"id": "b", "url": "http://x.test/", "goal": "use {{secret:hunter2}}",
                  "secrets": {"goal_1": "OTHER"}}]:
        tasks.write_text(json.dumps({"tasks": [task]}))
        with pytest.raises(TaskFileError) as error:
            load_task_file(tasks)
        assert "hunter2" not in str(error.value)
    # one value is one secret across the file, another value the next
    tasks.write_text(json.dumps({"tasks": [
        {"id": n, "url": "http://x.test/", "goal": g} for n, g in
        [("a", "{{secret:hunter2}}"), ("b", "{{secret:swordfish}} {{secret:hunter2}}")]]}))
    first, second = load_task_file(tasks)
    assert first.goal == "<secret:goal_1>" and second.goal == "<secret:goal_2> <secret:goal_1>"
    assert SecretStore.from_specs({**first.secrets, **second.secrets}).names == [
        "goal_1", "goal_2"]


def test_a_short_marked_value_stays_off_the_recorded_command_line() -> None:
    """A one- or two-character value is not redacted inside text (it would blot out
    ordinary words), so a recorded ``--goal`` kept it: the marked value itself goes."""
    from linewise.runtime.goal_secrets import take_goal_secrets
    from linewise.runtime.redaction import redact_argv

    goal, _ = take_goal_secrets("Type {{secret:Q7}} and {{secret:x}} now")
    assert goal == "Type <secret:goal_1> and <secret:goal_2> now"
    assert redact_argv(["run", "--goal", "Type {{secret:Q7}} and {{secret:x}} now",
                        "--goal=at {{secret:Q7}}"]) == [
        "run", "--goal", "Type <secret:goal_1> and <secret:goal_2> now",
        "--goal=at <secret:goal_1>"]


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for status in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = status.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(status.parent.name))
    found: list[int] = []
    todo = list(children.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo += children.get(child, [])
    return found


async def test_no_child_process_inherits_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chromium (every one of its processes) and the Playwright driver: before, a goal's
    value was exported into this process's environment, and they inherited it and
    every ``--secret`` variable."""
    from linewise.runtime.browser.chromium import Browser
    from linewise.runtime.goal_secrets import take_goal_secrets

    monkeypatch.setenv("SITE_PASSWORD", SECRET)
    monkeypatch.setenv("SITE_PASSWORD_COPY", f"x{SECRET}x")
    SecretStore.from_specs({"password": SecretSpec(env="SITE_PASSWORD")})
    take_goal_secrets("Sign in with {{secret:goal-Value-91}}")
    before = set(_descendants(os.getpid()))
    async with Browser() as browser:
        session = await browser.new_session()
        await session.page.goto("about:blank")
        processes = [p for p in _descendants(os.getpid()) if p not in before]
        environments = {}
        for pid in processes:
            try:
                environments[pid] = Path(f"/proc/{pid}/environ").read_bytes()
            except OSError:
                continue
        await session.close()
    assert len(environments) >= 3  # the driver, Chromium and its helpers
    assert any(b"PATH=" in env for env in environments.values())
    for pid, env in environments.items():
        for value in (SECRET, "goal-Value-91"):
            assert value.encode() not in env, (pid, value)
    assert os.environ["SITE_PASSWORD"] == SECRET  # this process's own is as it was


BROWSER_SPELLED = "S3cr~t*P@ss! w0rd'(x)"
"""``~ * ! ' ( )`` and a space: a GET form and ``encodeURIComponent`` spell it otherwise."""


def get_form_script(messages: list[dict[str, Any]]) -> str:
    """Types the secret into the GET form, submits it, then follows the echo's link."""
    prompt = messages[1]["content"]
    tree = prompt_section(prompt, "Current page")
    if "fill(" not in prompt_section(prompt, "History of your previous steps"):
        field = bid_matching(tree, "textbox 'Password'")
        return f"<action>fill('{field}', '{PLACEHOLDER}')</action>"
    if "?q=" in tree.split("\n")[0]:
        return "<action>send_msg_to_user('signed in')</action>"
    if "Echo:" not in tree:
        return f"<action>click('{bid_matching(tree, SIGN_IN)}')</action>"
    return f"<action>click('{bid_matching(tree, AGAIN)}')</action>"


SIGN_IN, AGAIN = "button 'Sign in'", "link 'again'"


@pytest.mark.slow
def test_a_secret_sent_by_a_get_form_stays_redacted_in_every_record(
    pages: StaticServer, tmp_path: Path
) -> None:
    tasks = write_task_file(tmp_path / "tasks.yaml", pages.url("login_get.html"))
    run = sign_in(get_form_script, tmp_path, str(tasks), env={"SITE_PASSWORD": BROWSER_SPELLED})
    # the page URL carried the form-encoded value, then the encodeURIComponent one
    assert any(f"login_get.html?pw={PLACEHOLDER}" in p for p in run.prompts)
    assert any(f"login_get.html?q={PLACEHOLDER}" in p for p in run.prompts)
    run.assert_never_leaked(BROWSER_SPELLED)


@pytest.mark.slow
async def test_a_secret_is_typed_only_on_its_domains(
    pages: StaticServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SITE_PASSWORD", SECRET)
    task = WebTask(id="login", url=pages.url("login.html"), goal="Sign in.", max_steps=4,
                   secrets={"password": SecretSpec(env="SITE_PASSWORD",
                                                   domains=("example.com",))})
    with ScriptedChatServer(login_script) as llm:
        model = ChatClient(EndpointSettings(base_url=llm.base_url, model="scripted"))
        try:
            [summary] = await run_tasks([task], LinewiseSettings(screenshots=False),
                                        tmp_path / "run", action_model=model, argv=["t"])
        finally:
            await model.close()
        second_prompt = llm.requests[1]["messages"][1]["content"]
    assert "may not be typed on this page (127.0.0.1:" in second_prompt
    assert "nothing was typed" in second_prompt
    steps = [json.loads(line) for line in
             next((tmp_path / "run").glob("login*/steps.jsonl")).read_text().splitlines()]
    assert "may not be typed" in (steps[0]["action_error"] or "")
    assert "value=" not in steps[1]["axtree"].split("textbox 'User'")[1].split("\n")[0]
    assert summary.n_steps >= 2


def test_store_refuses_unknown_names_frames_and_other_hosts() -> None:
    store = SecretStore({"pin": Secret("pin", "4711-x", ())})
    start = "https://bank.example/login"
    assert store.reveal("<secret:pin>", "https://bank.example/pay", start) == "4711-x"
    with pytest.raises(Exception, match="no secret named 'pwd'"):
        store.reveal("<secret:pwd>", start, start)
    with pytest.raises(Exception, match="may not be typed"):
        store.reveal("<secret:pin>", "https://evil.example/", start)
    with pytest.raises(Exception, match="may not be typed"):
        store.reveal("<secret:pin>", "file:///tmp/x.html", start)
    scoped = SecretStore({"pin": Secret("pin", "4711-x", ("example.org",))})
    assert scoped.reveal("<secret:pin>", "https://a.example.org/", start) == "4711-x"
    with pytest.raises(Exception, match="may not be typed"):
        scoped.reveal("<secret:pin>", "https://example.org.evil.com/", start)
    # Without domains the start origin, port included; a domain with a port pins it.
    for other in ("https://bank.example:8443/", "http://bank.example/"):
        with pytest.raises(Exception, match="may not be typed"):
            store.reveal("<secret:pin>", other, start)
    pinned = SecretStore({"pin": Secret("pin", "4711-x", ("example.org:8443",))})
    assert pinned.reveal("<secret:pin>", "https://a.example.org:8443/", start) == "4711-x"
    with pytest.raises(Exception, match=r"may not be typed on this page \(example.org\)"):
        pinned.reveal("<secret:pin>", "https://user:pw@example.org/", start)


def test_redactor_covers_encoded_forms_and_argv() -> None:
    redactor = Redactor()
    redactor.add("s3cret value", "<secret:x>")
    redactor.add("sk-abc123", API_KEY_PLACEHOLDER)
    assert redactor.text("u?p=s3cret+value&q=s3cret%20value") == "u?p=<secret:x>&q=<secret:x>"
    assert redactor.data({"a": ["sk-abc123"]}) == {"a": [API_KEY_PLACEHOLDER]}
    assert redactor.argv(["run", "--api-key", "other", "--api-key=k2", "--goal", "sk-abc123"]) \
        == ["run", "--api-key", API_KEY_PLACEHOLDER, f"--api-key={API_KEY_PLACEHOLDER}",
            "--goal", API_KEY_PLACEHOLDER]


FLAG_KEY = "sk-flag-7f3a9c1e5b"
ENV_KEY = "sk-env-2d8e4b6a0c"
LINEWISE_KEY = "sk-lw-9b1c3e5f7a"


def page_two_or_done(messages: list[dict[str, Any]]) -> str:
    return "<action>send_msg_to_user('done')</action>"


@pytest.mark.slow
@pytest.mark.parametrize("how", ["flag", "flag=", "env"])
def test_api_keys_never_land_in_a_run_folder(
    pages: StaticServer, tmp_path: Path, how: str
) -> None:
    run = tmp_path / "run"
    key_args = {"flag": ["--api-key", FLAG_KEY], "flag=": [f"--api-key={FLAG_KEY}"],
                "env": []}[how]
    env = {"OPENAI_API_KEY": ENV_KEY} if how == "env" else {}
    with ScriptedChatServer(page_two_or_done) as llm:
        result = linewise(
            "run", "--url", pages.url("form.html"), "--goal", "Say done",
            "--base-url", llm.base_url, "--model", "scripted", "--out", str(run),
            "--log-json", "--log-level", "DEBUG", *key_args, env=env,
        )
    assert result.returncode == 0, result.stderr
    for key in (FLAG_KEY, ENV_KEY):
        assert grep_folder(run, key) == []
        assert key not in result.stderr and key not in result.stdout
    manifest = json.loads((run / "run.json").read_text())
    if how != "env":
        assert API_KEY_PLACEHOLDER in " ".join(manifest["argv"])
    assert stat.S_IMODE(os.stat(run / "run.json").st_mode) == 0o600


@pytest.mark.slow
def test_api_keys_never_land_in_a_bench_folder(pages: StaticServer, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(json.dumps({"tasks": [
        {"id": "t", "url": pages.url("form.html"), "goal": "Say done", "max_steps": 2}]}))
    out = tmp_path / "bench"
    with ScriptedChatServer(page_two_or_done) as llm:
        result = linewise(
            "bench", str(tasks), "--base-url", llm.base_url, "--model", "scripted",
            "--out", str(out), "--concurrency", "1", "--log-json", "--api-key", FLAG_KEY,
            env={"OPENAI_API_KEY": ENV_KEY, "LINEWISE_ACTION__API_KEY": LINEWISE_KEY},
        )
    assert result.returncode == 0, result.stderr
    assert (out / "results.jsonl").exists()
    for key in (FLAG_KEY, ENV_KEY, LINEWISE_KEY):
        assert grep_folder(out, key) == [], key
        assert key not in result.stderr and key not in result.stdout
    assert stat.S_IMODE(os.stat(out / "bench.json").st_mode) == 0o600


def test_secret_and_budget_flags_become_settings() -> None:
    args = build_parser().parse_args([
        "run", "--url", "http://x.test/", "--goal", "g", "--secret", "password=SITE_PW",
        "--secret", "pin=BANK_PIN@bank.example,pay.example", "--max-cost", "0.5",
        "--max-run-tokens", "1000",
    ])
    settings = settings_from_args(args, resolve=False)
    assert settings.secrets == {
        "password": SecretSpec(env="SITE_PW"),
        "pin": SecretSpec(env="BANK_PIN", domains=("bank.example", "pay.example")),
    }
    assert settings.budget.max_cost_usd == 0.5 and settings.budget.max_run_tokens == 1000
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--secret", "no-env-var"])
