"""``linewise prune``, ``memory build`` and ``improve`` as a person runs them: a real
process on real trace folders, with a scripted model behind real HTTP. What they print
while they work, what they say at the end, their exit codes, and what they refuse."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import linewise

MINIWOB_TASKS = "tasks:\n  - {miniwob: click-test, seed: 0, max_steps: 2}\n"


@pytest.mark.parametrize(("flag", "seeds", "why"), [
    ("--train-seeds", "3-1", "seeds '3-1': the first is after the last"),
    ("--test-seeds", "x", "seeds must be A-B or A (A <= B, not negative), got 'x'"),
])
def test_improve_names_a_bad_seed_range(flag: str, seeds: str, why: str,
                                        tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(MINIWOB_TASKS)
    ranges = {"--train-seeds": "0-1", "--test-seeds": "5-6", flag: seeds}
    result = linewise("improve", str(tasks), *(w for pair in ranges.items() for w in pair),
                      "--out", str(tmp_path / "improve"), timeout=60)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == f"linewise improve: error: argument {flag}: {why}"
    assert "Traceback" not in result.stderr and not (tmp_path / "improve").exists()
