"""``linewise improve`` end to end: real Chromium on the local MiniWoB++ server, a
scripted model behind real HTTP that solves click-button only when a worked example is
in its prompt, two rounds, and the per-round table it reports."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from linewise.cli.main import main
from linewise.runtime.trace import read_steps, read_summary
from linewise.testing import ScriptedChatServer, miniwob_solver

TASKS = """\
defaults:
  max_steps: 2
tasks:
  - miniwob: click-test
    seed: 0
  - miniwob: click-button
    seed: 0
"""


def learner(messages: list[dict[str, Any]]) -> str:
    """Solves click-test always, click-button only after seeing a solved one."""
    prompt = messages[1]["content"]
    if "Click on the" in prompt.split("# Goal", 1)[1] and "# Worked examples" not in prompt:
        return "<think>I do not know what to do here.</think><action>noop()</action>"
    return miniwob_solver(messages)


@pytest.mark.slow
def test_improve_loop_learns_click_button_from_its_training_seeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(TASKS)
    out = tmp_path / "improve"
    command = ["improve", str(tasks), "--train-seeds", "0-0", "--test-seeds", "1-1",
               "--rounds", "2", "--out", str(out), "--model", "scripted",
               "--no-screenshots", "--filter", "none", "--no-embed"]
    with ScriptedChatServer(learner) as llm:
        code = main([*command, "--base-url", llm.base_url])
    captured = capsys.readouterr()
    printed = captured.out
    assert code == 0, captured.err[-3000:]

    report = json.loads((out / "improve.json").read_text())
    rows = {r["round"]: r for r in report["rounds"]}
    assert sorted(rows) == [0, 1, 2]
    assert (rows[0]["test"]["successes"], rows[0]["test"]["judged"]) == (1, 2)
    assert rows[0]["train"] is None
    # Round 1 trains without a memory (click-button fails), then the memory holds
    # click-test seed 0 only; round 2 trains with it and solves click-button seed 0 too,
    # while click-test seed 0, solved in round 1, is replayed from the replay cache (no
    # model call, not judged again). Both one-step episodes are the pruner's verdicts.
    assert rows[1]["train"]["successes"] == 1 and rows[1]["memory_entries"] == 1
    assert rows[2]["train"]["successes"] == 1 and rows[2]["train"]["judged"] == 1
    assert rows[2]["train"]["replayed"] == 1 and rows[2]["memory_entries"] == 2
    [replayed] = [read_summary(f) for f in (out / "round-2" / "train" / "none").iterdir()
                  if read_summary(f).outcome == "replayed"]
    assert replayed.task_id == "miniwob.click-test.seed0" and replayed.tokens.llm_calls == 0
    assert rows[1]["test"]["successes"] == 2 and rows[2]["test"]["successes"] == 2
    table = (out / "improve.md").read_text()
    assert table.startswith("Tasks: miniwob.click-test, miniwob.click-button; training "
                            "seeds 0-0, test seeds 1-1"), table
    assert table in printed
    assert re.search(r"\| 0 \(no memory\) \| – \| – \| 50\.0 ± 35\.4 \(1/2\) \|", table), table
    assert "| 2 | 2 (2) | 100.0 (1/1, +1 replayed) | 100.0 ± 0.0 (2/2) |" in table, table

    # Each test step records what it was shown, never its own task and seed, and the
    # examples open the user message, the same at every step.
    for folder in sorted((out / "round-2" / "test" / "none").iterdir()):
        steps = read_steps(folder)
        shown = [s.memory for s in steps]
        assert all(m is not None and m.entries for m in shown), folder
        assert all(".seed1/" not in e for m in shown if m for e in m.entries)
    examples = [r["messages"][1]["content"] for r in llm.requests
                if "# Worked examples" in r["messages"][1]["content"]]
    assert examples and all(text.startswith("# Worked examples") for text in examples)
    # The training bench of round 2 ran with entries of its own seeds, and says so.
    manifest = json.loads((out / "round-2" / "train" / "bench.json").read_text())
    assert manifest["memory_overlap"] == ["miniwob.click-test seed 0"]

    # The same command again continues the loop: everything is done, so no episode runs
    # and nothing is pruned again (no model call at all), and the report is the same.
    with ScriptedChatServer(learner) as again:
        assert main([*command, "--base-url", again.base_url]) == 0
    assert again.requests == []
    assert (out / "improve.md").read_text() == table
    assert "kept " in capsys.readouterr().err


def test_improve_refuses_overlapping_seeds(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(TASKS)
    code = main(["improve", str(tasks), "--train-seeds", "0-4", "--test-seeds", "4-6",
                 "--out", str(tmp_path / "x"), "--base-url", "http://127.0.0.1:9/v1",
                 "--model", "m"])
    assert code == 2
    assert "overlap" in capsys.readouterr().err


def skill_user(messages: list[dict[str, Any]]) -> str:
    """Calls the skill the prompt offers for its goal; else solves enter-text by hand."""
    offered = re.search(r"For this goal: (run_skill\(.*\))", messages[1]["content"])
    if offered is not None:
        return f"<think>A skill does it.</think><action>{offered.group(1)}</action>"
    return miniwob_solver(messages)


@pytest.mark.slow
def test_the_skills_arm_benches_the_test_seeds_with_skills_from_the_training_seeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text("defaults:\n  max_steps: 4\n  seed: 0\ntasks:\n  - miniwob: enter-text\n")
    out = tmp_path / "improve"
    with ScriptedChatServer(skill_user) as llm:
        code = main(["improve", str(tasks), "--train-seeds", "0-1", "--test-seeds", "5-6",
                     "--rounds", "1", "--out", str(out), "--base-url", llm.base_url,
                     "--model", "scripted", "--no-screenshots", "--filter", "none",
                     "--no-embed", "--no-prune", "--no-baseline", "--skills-arm"])
    captured = capsys.readouterr()
    assert code == 0, captured.err[-3000:]
    [row] = json.loads((out / "improve.json").read_text())["rounds"]
    assert row["skills"] == 1
    assert (row["test"]["successes"], row["test"]["judged"]) == (2, 2)
    assert (row["test_skills"]["successes"], row["test_skills"]["judged"]) == (2, 2)
    # by hand: a fill and a click, each a call; with the skill, which the goal fits:
    # none (the skill starts at the first step, agent.skill_start goal)
    assert row["test"]["calls_per_episode"] == 2.0
    assert row["test_skills"]["calls_per_episode"] == 0.0
    table = (out / "improve.md").read_text()
    assert "| 1 | 100.0 ± 0.0 (2/2) | 2.0 (0.0) |" in table, table
    assert (out / "round-1" / "skills" / "enter_text.json").is_file()


@pytest.mark.slow
def test_the_loop_retrains_the_retriever_on_its_training_steps_and_benches_with_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Real training (JAX), export (int8 ONNX) and the test bench run with the weights;
    run again, the loop keeps them, as its training bench ran nothing new."""
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text("defaults:\n  max_steps: 4\n  seed: 0\ntasks:\n  - miniwob: enter-text\n")
    out = tmp_path / "improve"
    command = ["improve", str(tasks), "--train-seeds", "0-1", "--test-seeds", "5-5",
               "--rounds", "1", "--out", str(out), "--model", "scripted",
               "--no-screenshots", "--filter", "none", "--no-embed", "--no-prune",
               "--no-baseline", "--retrain-retriever"]
    with ScriptedChatServer(miniwob_solver) as llm:
        code = main([*command, "--base-url", llm.base_url])
    captured = capsys.readouterr()
    assert code == 0, captured.err[-3000:]
    weights = out / "round-1" / "retriever"
    manifest = json.loads((weights / "manifest.json").read_text())
    [row] = json.loads((out / "improve.json").read_text())["rounds"]
    # two solved training episodes: steps that named an element on a page of several units
    assert row["retriever_examples"] == manifest["metrics"]["examples"] >= 2
    assert row["retriever"] == str(weights)
    test_bench = json.loads((out / "round-1" / "test" / "bench.json").read_text())
    assert test_bench["settings"]["filter"]["retriever_weights"] == str(weights)
    train_bench = json.loads((out / "round-1" / "train" / "bench.json").read_text())
    assert train_bench["settings"]["filter"]["retriever_weights"] is None
    # the whole tree is shown (filter none): every element acted on was in view
    assert row["test_targets_shown"] == 1.0
    assert f"| {row['retriever_examples']} | 100.0 |" in (out / "improve.md").read_text()

    written = (weights / "manifest.json").stat().st_mtime_ns
    with ScriptedChatServer(miniwob_solver) as llm:
        assert main([*command, "--base-url", llm.base_url]) == 0
    assert (weights / "manifest.json").stat().st_mtime_ns == written
