"""Replaying recorded episodes: real Chromium on local pages, real trace files.

A scripted model solves a task once; the page is then changed the way live pages change
(a banner that shifts every id, a reordered list, a renamed button, a dialog shown at
the start) and the recording is replayed, without a model or healed by one.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

import linewise
from linewise.runtime.replay.program import load_programs, read_program_file
from linewise.runtime.trace import read_steps
from linewise.testing import (
    CallInfo,
    FunctionModel,
    StaticServer,
    bid_matching,
    miniwob_solver,
    prompt_section,
)

PAGES = Path(__file__).parents[1] / "data" / "pages" / "replay"
GOAL = "Send a payment reminder to the customer of invoice 1042 (Alice)."
BANNER = ('<div role="banner"><p>Spring sale</p><a href="#sale">See offers</a>'
          '<button type="button">Dismiss</button><a href="#help">Help</a></div>')


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[StaticServer, Path]]:
    root = tmp_path / "site"
    shutil.copytree(PAGES, root)
    with StaticServer(root) as server:
        yield server, root


@pytest.fixture(scope="module")
async def recorded_site(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[StaticServer, Path, Path]]:
    """One recording of the reminder task for the module, on a site the tests change."""
    base = tmp_path_factory.mktemp("recorded")
    root = base / "site"
    shutil.copytree(PAGES, root)
    with StaticServer(root) as server:
        episode = await _record(server, base / "recorded")
        yield server, root, episode


@pytest.fixture
def recorded(
    recorded_site: tuple[StaticServer, Path, Path], tmp_path: Path
) -> tuple[Path, Path]:
    """The site as it was recorded (at the same address: a replay goes where its
    recording went) and the module's recording, copied for this test."""
    _server, root, episode = recorded_site
    shutil.rmtree(root)
    shutil.copytree(PAGES, root)
    copy = tmp_path / "recorded"
    shutil.copytree(episode.parent, copy)
    return root, copy / episode.name


def _task(server: StaticServer) -> linewise.WebTask:
    return linewise.WebTask(id="remind", url=server.url("index.html"), goal=GOAL,
                            max_steps=8, success={"url_contains": "customer=Alice"})


def recording_model() -> FunctionModel:
    """Solves the reminder task in four steps, reading the ids off each page."""
    def answer(messages: list[dict[str, Any]], info: CallInfo) -> str:
        tree = prompt_section(messages[1]["content"], "Current page")
        steps = [
            ("Open the invoice.", lambda: f"click('{bid_matching(tree, 'link .Invoice 1042')}')"),
            ("Type the customer.", lambda: f"fill('{bid_matching(tree, 'textbox')}', 'Alice')"),
            ("Send it.", lambda: f"click('{bid_matching(tree, 'button .Send reminder')}')"),
            ("Done.", lambda: "send_msg_to_user('The reminder was sent.')"),
        ]
        thought, action = steps[min(info.index, len(steps) - 1)]
        return f"<think>{thought}</think><action>{action()}</action>"
    return FunctionModel(answer, model="recorder")


def healing_model() -> FunctionModel:
    """Heals like a careful model: closes a dialog in the way, else presses the button
    that sends, whatever it is called now."""
    def answer(messages: list[dict[str, Any]], info: CallInfo) -> str:
        prompt = messages[1]["content"]
        assert "# A recorded solution of this task" in prompt
        tree = prompt_section(prompt, "Current page")
        if "button 'Accept'" in tree:
            accept = bid_matching(tree, "Accept")
            return f"<think>Close it.</think><action>click('{accept}')</action>"
        send = bid_matching(tree, "button .Send")
        return f"<think>The send button.</think><action>click('{send}')</action>"
    return FunctionModel(answer, model="healer")


async def _record(server: StaticServer, out: Path) -> Path:
    [summary] = await linewise.run(_task(server), model=recording_model(), out_dir=out)
    assert summary.success is True and summary.outcome == "agent", summary
    assert summary.directory is not None
    return summary.directory


def _change(root: Path, old: str, new: str) -> None:
    page = root / "index.html"
    text = page.read_text()
    assert old in text
    page.write_text(text.replace(old, new))


@pytest.mark.slow
async def test_a_recorded_episode_replays_with_no_model_on_a_changed_page(
    recorded: tuple[Path, Path], tmp_path: Path
) -> None:
    root, episode = recorded
    steps = read_steps(episode)
    # every executed action carries a locator of its element, not only its bid
    assert [len(s.targets) for s in steps] == [1, 1, 1, 0]
    assert steps[1].targets[0].role == "textbox" and steps[1].targets[0].label == "Customer"
    assert steps[2].targets[0].name == "Send reminder"

    # ids shifted by a banner, and the list in another order
    _change(root, "<!--BANNER-->", BANNER)
    items = root.joinpath("index.html").read_text()
    _change(root, items[items.index("<li>"):items.rindex("</li>") + 5],
            "\n".join(reversed(items[items.index("<li>"):items.rindex("</li>") + 5]
                               .split("\n"))))
    [summary] = await linewise.replay(episode, heal=False, out_dir=tmp_path / "replayed")
    assert summary.success is True and summary.outcome == "replayed", summary
    assert summary.tokens.llm_calls == 0 and summary.replay is not None
    assert summary.replay.replayed_steps == 4 and summary.replay.healed_steps == 0
    assert summary.agent_success is None  # never the agent's own success
    replayed = read_steps(summary.directory)  # type: ignore[arg-type]
    assert all(s.replay and s.replay.mode == "replayed" and not s.llm_calls for s in replayed)
    # the bids moved and the replay followed them
    assert replayed[0].action != steps[0].action
    assert replayed[0].replay.resolved == {  # type: ignore[union-attr]
        steps[0].targets[0].bid: replayed[0].targets[0].bid}


@pytest.mark.slow
async def test_a_renamed_button_diverges_without_a_model_and_is_healed_with_one(
    recorded: tuple[Path, Path], tmp_path: Path
) -> None:
    root, episode = recorded
    _change(root, "Send reminder", "Send notice")

    [diverged] = await linewise.replay(episode, heal=False, out_dir=tmp_path / "nomodel")
    assert diverged.termination == "diverged" and diverged.success is False
    assert diverged.outcome == "replayed" and diverged.tokens.llm_calls == 0
    assert diverged.replay is not None and diverged.replay.diverged_at == 2
    assert diverged.replay.divergence == "none"
    assert "step 3 of 4" in (diverged.error or "") and "Send reminder" in (diverged.error or "")

    healer = healing_model()
    [healed] = await linewise.replay(episode, model=healer, update=True,
                                     out_dir=tmp_path / "healed")
    assert healed.success is True and healed.outcome == "healed", healed
    assert healed.replay is not None and healed.replay.healed_steps == 1
    assert len(healer.requests) == 1 and healed.agent_success is None
    modes = [s.replay.mode for s in read_steps(healed.directory)]  # type: ignore[union-attr,arg-type]
    assert modes == ["replayed", "replayed", "healed", "replayed"]
    prompt = healer.requests[0].messages[1]["content"]
    assert "click(" in prompt and "button 'Send reminder'" in prompt

    # --update wrote the healed program beside the recording: the next replay needs no model
    program = read_program_file(episode / "program.json")
    assert program.steps[2].targets[0].name == "Send notice"
    [again] = await linewise.replay(episode, heal=False, out_dir=tmp_path / "again")
    assert again.success is True and again.outcome == "replayed"


@pytest.mark.slow
async def test_a_dialog_in_the_way_is_closed_by_healing_and_the_step_tried_again(
    recorded: tuple[Path, Path], tmp_path: Path
) -> None:
    root, episode = recorded
    _change(root, "<!--BANNER-->", (PAGES / "dialog.html").read_text())
    _change(root, '<main id="main">', '<main id="main" hidden>')
    healer = healing_model()
    [summary] = await linewise.replay(episode, model=healer, out_dir=tmp_path / "healed")
    assert summary.success is True and summary.outcome == "healed", summary
    steps = read_steps(summary.directory)  # type: ignore[arg-type]
    assert [(s.replay.mode, s.replay.program_step) for s in steps if s.replay] == [
        ("healed", 0), ("replayed", 0), ("replayed", 1), ("replayed", 2), ("replayed", 3)]
    assert steps[0].replay.divergence == "none"  # type: ignore[union-attr]
    assert len(healer.requests) == 1


@pytest.mark.slow
async def test_solved_miniwob_episodes_replay_with_zero_model_calls(tmp_path: Path) -> None:
    tasks = [linewise.MiniWoBTask(miniwob="click-button", seed=3, max_steps=5),
             linewise.MiniWoBTask(miniwob="enter-text", seed=1, max_steps=5)]
    solver = FunctionModel(lambda messages, _info: miniwob_solver(messages))
    solved = await linewise.run(tasks, model=solver, out_dir=tmp_path / "solved")
    assert [s.success for s in solved] == [True, True]
    replayed = await linewise.replay(tmp_path / "solved", heal=False,
                                     out_dir=tmp_path / "replayed")
    assert [(s.task_id, s.success, s.outcome) for s in replayed] == [
        (t.id, True, "replayed") for t in tasks]
    assert sum(s.tokens.llm_calls for s in replayed) == 0


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "linewise.cli.main", *args],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
async def test_the_replay_command_reports_a_divergence_and_refuses_bad_input(
    recorded: tuple[Path, Path], tmp_path: Path
) -> None:
    root, episode = recorded
    _change(root, "Send reminder", "Send notice")
    done = _cli("replay", str(episode), "--no-model", "--out", str(tmp_path / "cli"))
    assert done.returncode == 6, done.stderr
    assert "replayed (no)" in done.stdout and "0 model calls" in done.stdout

    damaged = tmp_path / "damaged.json"
    damaged.write_text('{"version": 1, "steps": [')
    for bad, says in ((damaged, "is not a JSON program"),
                      (tmp_path / "empty", "holds no successful episode"),
                      (tmp_path / "missing", "does not exist")):
        if bad.name == "empty":
            bad.mkdir()
        result = _cli("replay", str(bad), "--no-model")
        assert result.returncode == 2 and str(bad) in result.stderr and says in result.stderr


@pytest.mark.slow
async def test_a_replayed_secret_is_typed_from_its_variable_and_never_written(
    pages: StaticServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPLAY_TEST_PASSWORD", "s3cret-Zebra-42")
    task = linewise.WebTask(
        id="login", url=pages.url("login.html"), goal="Sign in as alice with <secret:pw>.",
        secrets={"pw": {"env": "REPLAY_TEST_PASSWORD"}}, max_steps=5,
        success={"page_contains": "Echo: alice"})

    def login(messages: list[dict[str, Any]], info: CallInfo) -> str:
        tree = prompt_section(messages[1]["content"], "Current page")
        user, password = bid_matching(tree, "textbox 'User'"), bid_matching(tree, "Password")
        actions = [f"fill('{user}', 'alice')", f"fill('{password}', '<secret:pw>')",
                   f"click('{bid_matching(tree, 'button')}')",
                   "send_msg_to_user('signed in')"]
        return f"<think>Next.</think><action>{actions[info.index]}</action>"

    [recorded] = await linewise.run(task, model=FunctionModel(login), out_dir=tmp_path / "rec")
    assert recorded.success is True
    [program] = load_programs(recorded.directory)  # type: ignore[arg-type]
    assert "fill(" in program.steps[1].action and "<secret:pw>" in program.steps[1].action
    [replayed] = await linewise.replay(recorded.directory, heal=False,  # type: ignore[arg-type]
                                       out_dir=tmp_path / "replayed")
    assert replayed.success is True and replayed.outcome == "replayed"
    for folder in (tmp_path / "rec", tmp_path / "replayed"):
        for path in folder.rglob("*"):
            if path.is_file() and path.suffix in (".json", ".jsonl"):
                assert "s3cret-Zebra-42" not in path.read_text(), path
    steps = read_steps(replayed.directory)  # type: ignore[arg-type]
    assert "s3cret-Zebra-42" not in json.dumps([s.model_dump(mode="json") for s in steps])
    # typed for real: the page echoed it back, redacted in what was recorded
    assert "Echo: alice / <secret:pw>" in steps[-1].axtree


@pytest.mark.slow
async def test_the_replay_cache_replays_a_solved_task_and_heals_a_changed_page(
    site: tuple[StaticServer, Path], tmp_path: Path
) -> None:
    server, root = site
    cache = tmp_path / "cache"
    recorder = recording_model()
    [first] = await linewise.run(_task(server), model=recorder, out_dir=tmp_path / "1",
                                 replay_cache=cache)
    assert first.outcome == "agent" and first.success is True and len(recorder.requests) == 4
    assert len(list(cache.glob("remind.*.json"))) == 1

    [second] = await linewise.run(_task(server), model=recorder, out_dir=tmp_path / "2",
                                  replay_cache=cache)
    assert second.outcome == "replayed" and second.success is True
    assert len(recorder.requests) == 4  # not asked again
    # another goal is another task: solved by the model, not replayed
    other = _task(server).model_copy(update={"goal": GOAL + " Be quick."})
    [third] = await linewise.run(other, model=recorder, out_dir=tmp_path / "3",
                                 replay_cache=cache)
    assert third.outcome == "agent" and third.replay is None

    _change(root, "Send reminder", "Send notice")
    healer = healing_model()
    [healed] = await linewise.run(_task(server), model=healer, out_dir=tmp_path / "4",
                                  replay_cache=cache)
    assert healed.outcome == "healed" and healed.success is True and len(healer.requests) == 1
    # the healed program replaced the old one: the next run needs no model
    [fourth] = await linewise.run(_task(server), model=healer, out_dir=tmp_path / "5",
                                  replay_cache=cache)
    assert fourth.outcome == "replayed" and len(healer.requests) == 1


@pytest.mark.slow
async def test_a_replay_waits_for_an_element_a_page_adds_late(
    site: tuple[StaticServer, Path], tmp_path: Path
) -> None:
    """The recording waited for the button (its noop is not part of the program); the
    replay, with no model to pace it, looks again until the button is there."""
    server, _root = site
    task = linewise.WebTask(id="late", url=server.url("delayed.html"), goal="Send it.",
                            max_steps=5, success={"url_contains": "customer=late"})

    def patient(messages: list[dict[str, Any]], info: CallInfo) -> str:
        tree = prompt_section(messages[1]["content"], "Current page")
        if "sent to late" in tree:
            return "<think>Done.</think><action>send_msg_to_user('sent')</action>"
        if "button 'Send reminder'" not in tree:
            return "<think>Not there yet.</think><action>noop(1500)</action>"
        button = bid_matching(tree, "button")
        return f"<think>Now.</think><action>click('{button}')</action>"

    [recorded] = await linewise.run(task, model=FunctionModel(patient), out_dir=tmp_path / "r")
    assert recorded.success is True
    [program] = load_programs(recorded.directory)  # type: ignore[arg-type]
    assert [s.action.split("(")[0] for s in program.steps] == ["click", "send_msg_to_user"]
    [replayed] = await linewise.replay(recorded.directory, heal=False,  # type: ignore[arg-type]
                                       out_dir=tmp_path / "again")
    assert replayed.success is True and replayed.outcome == "replayed", replayed
