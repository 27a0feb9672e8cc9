"""A bench folder holds one bench: a run with episodes outside its plan is refused.

A real ``linewise bench`` on MiniWoB++ (the scripted model behind real HTTP).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from linewise.testing import ScriptedChatServer, miniwob_solver

CLICK_TEST = """\
defaults:
  max_steps: 3
tasks:
  - miniwob: click-test
    seed: 1
"""
ENTER_TEXT = CLICK_TEST.replace("click-test", "enter-text")
LINEWISE = [sys.executable, "-m", "linewise.cli.main"]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LINEWISE_"))}
    return env | extra


def _bench(tasks: Path, out: Path, base_url: str, *extra: str) -> list[str]:
    return [*LINEWISE, "bench", str(tasks), "--filter", "none", "--concurrency", "1",
            "--out", str(out), "--base-url", base_url, "--model", "scripted",
            "--no-screenshots", "--log-json", *extra]


def test_a_folder_rerun_with_another_task_file_is_refused(tmp_path: Path) -> None:
    """Before: the second file's episodes joined the first's in one report."""
    first, other = tmp_path / "first.yaml", tmp_path / "other.yaml"
    first.write_text(CLICK_TEST)
    other.write_text(ENTER_TEXT)
    out = tmp_path / "bench"
    with ScriptedChatServer(miniwob_solver) as llm:
        made = subprocess.run(_bench(first, out, llm.base_url), env=_env(),
                              capture_output=True, text=True, timeout=120)
        assert made.returncode == 0, made.stderr[-3000:]
        before = (out / "results.jsonl").read_text()
        mixed = subprocess.run(_bench(other, out, llm.base_url), env=_env(),
                               capture_output=True, text=True, timeout=120)
        # the same plan again is a resume, not another bench
        again = subprocess.run(_bench(first, out, llm.base_url), env=_env(),
                               capture_output=True, text=True, timeout=120)
    assert mixed.returncode == 2, mixed.stderr[-3000:]
    assert (f"{out} holds another bench: 1 of the 1 episodes asked for are not in its plan "
            "of 1 (first: miniwob.enter-text.seed1 (seed 1, filter none)). Use another "
            f"--out, or continue that bench: linewise bench {first} ") in mixed.stderr, \
        mixed.stderr[-2000:]
    assert (out / "results.jsonl").read_text() == before
    assert again.returncode == 0 and "already done 1" in again.stdout, again.stderr[-2000:]
