"""results.jsonl lines end at "\\n" only: an error message or a thought holding U+2028,
U+0085 or another character ``str.splitlines`` ends lines at is one line, for every
reader of the file (resume's take-out, the viewer's index, the memory builder)."""

from __future__ import annotations

from pathlib import Path

from linewise.apps.bench.plan import EpisodeKey
from linewise.apps.bench.results import EpisodeResult, ResultsWriter, read_results, take_out
from linewise.apps.memory.build import read_bench_rows
from linewise.apps.viewer.discover import read_result_rows

ERROR = "page said:\u2028line two\u0085line three\x1eend"


def _result(seed: int, error: str | None = ERROR) -> EpisodeResult:
    return EpisodeResult(
        task_id=f"miniwob.click-test.seed{seed}", base_task="miniwob.click-test",
        benchmark="miniwob", seed=seed, filter="none", agent="m", success=False,
        error=error, error_kind="page" if error else None,
        episode_dir=f"none/miniwob.click-test.seed{seed}")


def _bench(tmp_path: Path) -> Path:
    with ResultsWriter(tmp_path / "results.jsonl") as writer:
        for seed in range(3):
            writer.append(_result(seed))
    assert "\u2028" in (tmp_path / "results.jsonl").read_text(encoding="utf-8")  # raw
    return tmp_path / "results.jsonl"


def test_taking_a_line_out_keeps_the_others_whole(tmp_path: Path) -> None:
    path = _bench(tmp_path)
    taken = take_out(path, {EpisodeKey("miniwob.click-test.seed1", 1, "none")},
                     tmp_path / "_infra" / "results.jsonl")
    assert [r.seed for r in taken] == [1] and taken[0].error == ERROR
    assert path.read_bytes().count(b"\n") == 2  # two lines, not two lines cut in pieces
    assert [(r.seed, r.error) for r in read_results(path)] == [(0, ERROR), (2, ERROR)]
    assert [r.error for r in read_results(tmp_path / "_infra" / "results.jsonl")] == [ERROR]


def test_the_viewer_and_the_memory_builder_read_every_row(tmp_path: Path) -> None:
    _bench(tmp_path)
    rows = read_result_rows(tmp_path)
    assert sorted(rows) == [f"none/miniwob.click-test.seed{s}" for s in range(3)]
    assert {row.error_kind for row in rows.values()} == {"page"}
    by_folder = read_bench_rows([tmp_path])
    assert sorted(row["seed"] for row in by_folder.values()) == [0, 1, 2]
