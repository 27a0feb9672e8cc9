"""Memory files that once broke linewise itself: line separators inside a thought, bytes
that are not UTF-8, JSON nested too deeply, a vector of the wrong size. Each is read
back, refused with the file and line named (exit 2), or ignored with a note: never a
traceback, never a crashed episode."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from linewise.agent.experience.store import MemoryEntry, MemoryStep, read_memory, write_memory
from linewise.agent.text.embedders import MiniLMEmbedder
from linewise.cli.main import main
from linewise.runtime.run import run
from linewise.runtime.tasks.schema import MiniWoBTask
from linewise.runtime.trace import read_steps
from linewise.settings import AgentSettings, LinewiseSettings
from linewise.testing import FunctionModel, miniwob_solver

SEPARATORS = ["\u2028", "\u2029", "\u0085", "\x1c", "\x1e", "\x0b", "\x0c"]
"""Characters ``str.splitlines`` ends a line at; in a JSON string they are characters."""


def _entry(seed: int, think: str = "Click the button.", vector: list[float] | None = None,
           embedder: str | None = None) -> MemoryEntry:
    return MemoryEntry(
        id=f"miniwob.click-test.seed{seed}/ep", task_id=f"miniwob.click-test.seed{seed}",
        task="miniwob.click-test", seed=seed, kind="miniwob", goal="Click the button.",
        steps=[MemoryStep(index=0, observation="[4] button 'Click Me!'", think=think,
                          action="click('4')")],
        embedder=embedder, embedding=vector)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "LINEWISE_")):
            monkeypatch.delenv(name)


def test_line_separators_inside_a_thought_are_read_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "memory.jsonl"
    thoughts = [f"Before{sep}after: click it." for sep in SEPARATORS]
    write_memory(path, [_entry(seed, think) for seed, think in enumerate(thoughts)])
    assert any(sep in path.read_text(encoding="utf-8") for sep in SEPARATORS)  # written raw
    assert [e.steps[0].think for e in read_memory(path)] == thoughts
    assert main(["memory", "show", str(path)]) == 0
    assert capsys.readouterr().out.count("miniwob.click-test\tseed") == len(SEPARATORS)
    assert main(["memory", "show", str(path), "--goal", "Click the button.",
                 "--task-id", "miniwob.click-test.seed99"]) == 0
    assert "thought: Before after: click it." in capsys.readouterr().out


@pytest.mark.slow
async def test_an_episode_reads_a_memory_with_a_line_separator(tmp_path: Path) -> None:
    path = tmp_path / "memory.jsonl"
    write_memory(path, [_entry(2, "The button\u2028is the only control.")])
    model = FunctionModel(lambda messages, info: miniwob_solver(messages))
    settings = LinewiseSettings(screenshots=False, filter={"name": "none"})
    [summary] = await run(MiniWoBTask(miniwob="click-test", seed=1, max_steps=2), model=model,
                          settings=settings, out_dir=tmp_path / "run", memory=path)
    assert summary.success and summary.outcome == "agent"
    assert "thought: The button is the only control." in model.requests[0].messages[1]["content"]


def _damaged(tmp_path: Path, line: bytes) -> Path:
    path = tmp_path / "memory.jsonl"
    write_memory(path, [_entry(1)])
    with path.open("ab") as handle:
        handle.write(line + b"\n")
    return path


@pytest.mark.parametrize(("line", "why"), [
    (b'{"version": 1, "goal": "caf\xe9"}', "not UTF-8 (byte 27)"),
    (b'{"version": 1, "x": ' + b"[" * 200_000 + b"]" * 200_000 + b"}", "nested too deeply"),
    (b'{"version": 1, "id": "x"', "not JSON"),
    (b'{"version": 1, "id": "x", "task_id": "t", "task": "t", "goal": "g", "steps": 3}',
     "not a memory entry (steps"),
])
def test_a_damaged_line_is_refused_with_its_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: bytes, why: str
) -> None:
    path = _damaged(tmp_path, line)
    for command in (["memory", "show", str(path)],
                    ["memory", "show", str(path), "--goal", "Click the button."]):
        assert main(command) == 2
        error = capsys.readouterr().err
        assert f"memory {path} line 2: " in error and why in error, error
        assert "Traceback" not in error


def test_a_run_with_a_damaged_memory_stops_before_it_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _damaged(tmp_path, b"\xff\xfe")
    out = tmp_path / "run"
    assert main(["run", "--url", "http://127.0.0.1:9/", "--goal", "Click.", "--memory",
                 str(path), "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                 "--out", str(out)]) == 2
    assert f"memory {path} line 2: not UTF-8" in capsys.readouterr().err
    assert not out.exists()  # nothing was started


async def test_a_vector_of_the_wrong_size_is_ignored_with_a_note(tmp_path: Path) -> None:
    name = MiniLMEmbedder().name
    [good] = await MiniLMEmbedder().embed(["Click the button."])
    path = tmp_path / "memory.jsonl"
    write_memory(path, [_entry(2, vector=[0.5, 0.5, 0.5], embedder=name),  # 3, not 384
                        _entry(3, vector=[float(x) for x in good], embedder=name)])
    model = FunctionModel(lambda messages, info: miniwob_solver(messages))
    settings = LinewiseSettings(screenshots=False, filter={"name": "none"},
                                agent=AgentSettings(memory_k=2))
    [summary] = await run(MiniWoBTask(miniwob="click-test", seed=1, max_steps=2), model=model,
                          settings=settings, out_dir=tmp_path / "run", memory=path)
    assert summary.success and summary.outcome == "agent", summary.error
    [step] = read_steps(tmp_path / "run" / "miniwob.click-test.seed1")
    assert step.memory is not None and step.memory.retrieval == "lexical+embedding"
    assert step.memory.note is not None
    assert "1 entries have vectors that are not unit vectors of 384 numbers" in step.memory.note
    assert "miniwob.click-test.seed2/ep" in step.memory.note
    assert sorted(step.memory.entries) == ["miniwob.click-test.seed2/ep",
                                           "miniwob.click-test.seed3/ep"]
