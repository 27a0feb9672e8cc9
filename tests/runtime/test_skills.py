"""Skills induced from solved MiniWoB++ episodes, and called by the action model: real
Chromium, real MiniWoB++ pages, scripted models."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import linewise
from linewise.apps.skills.build import build_skills
from linewise.runtime.replay.skill import SkillLibrary, read_skill
from linewise.runtime.trace import read_steps
from linewise.settings import LinewiseSettings
from linewise.testing import CallInfo, FunctionModel, bid_matching, prompt_section
from tests.support.paths import REPO

TREES = REPO / "tests" / "data" / "trees"


def login_solver(messages: list[dict[str, Any]], info: CallInfo) -> str:
    """Logs in on login-user the long way, one field at a time."""
    prompt = messages[1]["content"]
    goal = prompt_section(prompt, "Goal")
    user, password = re.findall(r'"([^"]+)"', goal)
    lines = prompt_section(prompt, "Current page").splitlines()
    boxes = [bid_matching(line, "textbox") for line in lines if "textbox" in line]
    focused = [line for line in lines if "textbox" in line and "value=" in line]
    if not focused:
        return f"<think>Username first.</think><action>fill('{boxes[0]}', '{user}')</action>"
    if len(focused) == 1:
        return f"<think>Then the password.</think><action>fill('{boxes[1]}', '{password}')</action>"
    login = bid_matching("\n".join(lines), "button 'Login'")
    return f"<think>Log in.</think><action>click('{login}')</action>"


def skill_caller(messages: list[dict[str, Any]], info: CallInfo) -> str:
    """Calls the skill the prompt offers for its goal; clicks the button otherwise."""
    prompt = messages[1]["content"]
    offered = re.search(r"For this goal: (run_skill\(.*\))", prompt)
    if offered is not None:
        return f"<think>A skill does it.</think><action>{offered.group(1)}</action>"
    button = bid_matching(prompt_section(prompt, "Current page"), "button")
    return f"<think>Press it.</think><action>click('{button}')</action>"


@pytest.mark.slow
async def test_a_skill_from_five_seeds_logs_in_on_a_sixth_with_its_credentials(
    tmp_path: Path,
) -> None:
    train = [linewise.MiniWoBTask(miniwob="login-user", seed=seed, max_steps=5)
             for seed in range(5)]
    solved = await linewise.run(train, model=FunctionModel(login_solver),
                                out_dir=tmp_path / "train")
    assert all(s.success for s in solved) and {s.n_steps for s in solved} == {3}

    [skill] = build_skills([tmp_path / "train"], tmp_path / "skills")
    assert skill.name == "login_user"
    assert [p.name for p in skill.parameters] == ["username", "password"]
    assert skill.goal_template == ('Enter the username "{{username}}" and the password '
                                   '"{{password}}" into the text fields and press login.')
    assert len(skill.steps) == 3 and len(skill.provenance) == 5
    body = json.dumps([s.model_dump(mode="json") for s in (*skill.steps,)]
                      + [t.model_dump(mode="json") for t in skill.precondition])
    assert "{{username}}" in body and "{{password}}" in body
    for summary in solved:  # no episode's own values stay in the body, only placeholders
        for value in re.findall(r'"([^"]+)"', summary.goal):
            assert value not in body, value
    assert read_skill(tmp_path / "skills" / "login_user.json") == skill

    test = linewise.MiniWoBTask(miniwob="login-user", seed=5, max_steps=5)
    for start, calls in (("goal", 0), ("model", 1)):
        caller = FunctionModel(skill_caller)
        settings = LinewiseSettings().resolved()
        settings = settings.model_copy(update={"agent": settings.agent.model_copy(update={
            "skills": tmp_path / "skills", "action_grammar": "on", "skill_start": start})})
        [summary] = await linewise.run(test, model=caller, settings=settings,
                                       out_dir=tmp_path / f"test-{start}")
        assert summary.success is True and summary.outcome == "agent", summary
        assert len(caller.requests) == calls and summary.skill_steps == 3
        steps = read_steps(summary.directory)  # type: ignore[arg-type]
        assert [s.replay.skill if s.replay else None for s in steps] == ["login_user"] * 3
        assert steps[0].replay is not None and steps[0].replay.skill_start == start
        assert steps[0].action_raw is not None and "run_skill(" in steps[0].action_raw
        user, password = re.findall(r'"([^"]+)"', summary.goal)
        assert [s.action.split(", ")[1] for s in steps[:2]] == [f"'{user}')",
                                                                f"'{password}')"]
    # called by the model: the grammar offered the skill with its parameters
    grammar = caller.requests[0].params["extra_body"]["grammar"]
    assert "run_skill('login_user', {" in grammar


def tab_searcher(messages: list[dict[str, Any]], info: CallInfo) -> str:
    """Solves click-tab-2 as a person does: clicks the goal's link where it is shown,
    else opens the tab after the one shown."""
    prompt = messages[1]["content"]
    word = re.findall(r'"([^"]+)"', prompt_section(prompt, "Goal"))[-1]
    lines = prompt_section(prompt, "Current page").splitlines()
    for line, below in itertools.pairwise(lines):
        if "generic" in line and below.strip().endswith(f"StaticText {word!r}"):
            return (f"<think>There it is.</think><action>click("
                    f"'{bid_matching(line, 'generic')}')</action>")
    tabs = [line for line in lines if re.search(r"\btab '", line)]
    shown = next(i for i, line in enumerate(tabs) if "selected=True" in line)
    following = tabs[(shown + 1) % len(tabs)]
    return f"<think>Not here.</think><action>click('{bid_matching(following, 'tab')}')</action>"


def never_acts(messages: list[dict[str, Any]], info: CallInfo) -> str:
    return "<think>Nothing I can do.</think><action>noop()</action>"


@pytest.mark.slow
async def test_a_skill_opens_tabs_until_the_goal_s_link_is_shown(tmp_path: Path) -> None:
    """Episodes that searched other tabs for their link give a skill whose tab clicks
    are one search: on new seeds it opens tabs until the goal's link is shown, whichever
    tab holds it, with no model call."""
    train = [linewise.MiniWoBTask(miniwob="click-tab-2", seed=seed, max_steps=5)
             for seed in range(4)]
    solved = await linewise.run(train, model=FunctionModel(tab_searcher),
                                out_dir=tmp_path / "train", filter="none")
    assert all(s.success for s in solved), solved
    assert any(s.n_steps > 1 for s in solved)  # some link was behind another tab
    [skill] = build_skills([tmp_path / "train"], tmp_path / "skills")
    assert [step.reveal for step in skill.steps] == [True, False], skill.steps
    assert skill.steps[1].targets[0].text == "{{link}}"

    test = [linewise.MiniWoBTask(miniwob="click-tab-2", seed=seed, max_steps=5)
            for seed in range(10, 16)]
    idle = FunctionModel(never_acts)
    settings = LinewiseSettings().resolved()
    settings = settings.model_copy(update={"agent": settings.agent.model_copy(update={
        "skills": tmp_path / "skills", "skill_start": "goal"})})
    done = await linewise.run(test, model=idle, settings=settings, filter="none",
                              out_dir=tmp_path / "test")
    assert [s.success for s in done] == [True] * len(test), done
    assert idle.requests == []
    assert any(s.skill_steps > 1 for s in done)  # a tab was opened by the skill


def test_a_skill_whose_first_elements_are_missing_is_not_offered(tmp_path: Path) -> None:
    library = SkillLibrary.load(_login_skill(tmp_path))
    login = (TREES / "miniwob-login-user.txt").read_text().splitlines()
    other = (TREES / "miniwob-book-flight.txt").read_text().splitlines()
    goal = 'Enter the username "ann" and the password "x7" into the text fields and press login.'
    assert [s.name for s in library.offered(goal, login)] == ["login_user"]
    assert library.offered(goal, other) == []


def _login_skill(tmp_path: Path) -> Path:
    """A skill folder made by the command line from a tiny recorded login."""
    folder = tmp_path / "skills"
    folder.mkdir()
    source = REPO / "tests" / "data" / "skills" / "login_user.json"
    (folder / "login_user.json").write_text(source.read_text())
    return folder


@pytest.mark.slow
def test_bad_skill_input_is_refused_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "x.json").write_text("{not json")
    for folder, says in ((tmp_path / "empty", "holds no skill"),
                         (damaged, "is not a JSON skill")):
        done = subprocess.run([sys.executable, "-m", "linewise.cli.main", "skills", "show",
                               str(folder)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and says in done.stderr and str(folder) in done.stderr
    done = subprocess.run([sys.executable, "-m", "linewise.cli.main", "skills", "build",
                           str(tmp_path / "empty"), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "holds no successful episode" in done.stderr
    # a run given an empty skill set stops before anything starts, naming the folder
    done = subprocess.run([sys.executable, "-m", "linewise.cli.main", "run", "--url",
                           "http://127.0.0.1:9/", "--goal", "g", "--skills",
                           str(tmp_path / "empty"), "--base-url", "http://127.0.0.1:9/v1",
                           "--model", "m", "--out", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "holds no skill" in done.stderr, done.stderr
    assert str(tmp_path / "empty") in done.stderr
