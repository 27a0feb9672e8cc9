"""``linewise report IMPROVE_DIR``: an improve folder's report, read again from its round
benches.

    IMPROVE_DIR/improve.json, improve.md   the loop's own report (``apps/improve/report``),
                                           its success figures counted again from the
                                           round benches
    IMPROVE_DIR/report.md, .html, .json    its rounds arm by arm (success ± SE with n,
                                           infrastructure endings, replays, model calls),
                                           then its round benches side by side, as
                                           ``linewise report A B`` compares benches
    IMPROVE_DIR/view/index.html            the viewer index over its rounds
    IMPROVE_DIR/round-R/PART/report.*      each round bench's own report

The loop writes improve.json as each round ends; a loop cut short, or a round bench
continued afterwards (``linewise bench … --resume --out IMPROVE_DIR/round-1/test``),
leaves it behind its benches. Here every success is counted from the bench folders, as
improve counts it (``Success.of``: each episode once, as its last attempt ended); what
only the loop knew (the tasks, seeds and filter it was given, each round's memory and
skill counts) is kept from improve.json, or, where the loop recorded none, read from the
benches and the round's memory file.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from linewise.agent.experience.store import read_memory
from linewise.apps.bench.report_markdown import md_table
from linewise.apps.bench.results import EpisodeResult
from linewise.apps.compare.benches import (
    ROUND_PARTS,
    Bench,
    improve_benches,
    read_bench,
    round_folders,
)
from linewise.apps.compare.data import Comparison
from linewise.apps.improve.report import (
    REPORT_FILE,
    TABLE_FILE,
    ImproveReport,
    RoundResult,
    Success,
    improve_table,
    success_cell,
)
from linewise.errors import ConfigError

PART_NAMES = {"train": "train", "test": "test", "test-skills": "test with skills"}


class RoundArm(BaseModel):
    """One bench of a round: a row of the report's rounds table."""

    round: int
    part: str = Field(description="train, test or test-skills.")
    bench: str = Field(description="The bench's label (``round-1/test``).")
    memory_entries: int | None = Field(description="Entries of the memory this bench ran "
                                       "with (None: none, as in round 0).")
    memory_from_pruner: int | None = None
    skills: int | None = Field(default=None, description="Skills it was offered.")
    planned: int | None
    ran: int
    success: Success


class ImproveStudy(Comparison):
    """report.json of an improve folder: the comparison of its round benches, with the
    loop's report and its rounds arm by arm."""

    improve: ImproveReport
    rounds: list[RoundArm]


def read_improve(improve_dir: Path) -> list[Bench]:
    """The round benches of ``improve_dir``, labelled ``round-R/part``."""
    benches = [read_bench(path, label) for label, path in improve_benches(improve_dir)]
    if not benches:
        raise ConfigError(f"{improve_dir} holds no round bench yet (round-N/test, "
                          "round-N/train): nothing to report")
    return benches


def rebuild_report(improve_dir: Path, benches: list[Bench]) -> ImproveReport:
    """improve.json with every success counted again from ``benches``; a round the loop
    recorded no row for (it was cut short) gets one from its benches."""
    recorded = _recorded(improve_dir)
    by_label = {b.label: b for b in benches}
    report = recorded or _header(improve_dir, benches)
    rows = {row.round: row for row in report.rounds}
    notes = list(report.notes)
    found_now = [f"{b.label}: {b.state.ran} of {b.state.planned} planned episodes ran "
                 "(report.md says how to continue it)" for b in benches
                 if b.state.planned is not None and not b.state.complete]
    rounds = []
    for number, folder in round_folders(improve_dir):
        found = {part: by_label.get(f"round-{number}/{part}") for part in ROUND_PARTS}
        if not any(found.values()):
            continue
        success = {part: Success.of(b.results) if b is not None else None
                   for part, b in found.items()}
        row = rows.get(number)
        if row is None:
            row = _unrecorded(number, folder)
            if recorded is not None:
                notes.append(f"round {number}: not recorded by the loop (it stopped "
                             "during the round); its figures are its benches'")
        if success["test"] is None:
            found_now.append(f"round {number}: no test bench (the loop stopped before it)")
        rounds.append(row.model_copy(update={
            "train": success["train"], "test": success["test"] or Success(),
            "test_skills": success["test-skills"],
            "skills": _skills_induced(folder) if row.skills is None else row.skills}))
    return report.model_copy(update={"rounds": rounds, "notes": list(dict.fromkeys(notes)),
                                     "bench_notes": found_now})


def _recorded(improve_dir: Path) -> ImproveReport | None:
    path = improve_dir / REPORT_FILE
    try:
        return ImproveReport.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, ValidationError) as exc:
        raise ConfigError(f"{path}: not an improve report the loop wrote ({exc}); move it "
                          "aside and it is rebuilt from the round benches") from exc


def _header(improve_dir: Path, benches: list[Bench]) -> ImproveReport:
    """What improve.json would open with, from the benches: the loop stopped before it
    recorded its first round."""
    def seeds(*parts: str) -> str:
        found = sorted({r.seed for b in benches if b.label.rsplit("/", 1)[-1] in parts
                        for r in b.results})
        return f"{found[0]}-{found[-1]}" if found else "?"

    results: list[EpisodeResult] = [r for b in benches for r in b.results]
    return ImproveReport(
        tasks=list(dict.fromkeys(r.base_task for r in results)),
        train_seeds=seeds("train"), test_seeds=seeds("test", "test-skills"),
        filter=", ".join(dict.fromkeys(r.filter for r in results)) or "?",
        prune=any((folder / "pruned").is_dir() for _, folder in round_folders(improve_dir)),
        notes=[f"{REPORT_FILE} rebuilt from the round benches: the loop recorded none (it "
               "stopped before its first round ended, or the file was removed)"])


def _unrecorded(number: int, folder: Path) -> RoundResult:
    """A round's row from its folder: its memory file's entries, and the skills it
    induced (one file each) where the loop ran the skills arm."""
    memory = folder / "memory.jsonl"
    entries = read_memory(memory) if number and memory.is_file() else []
    return RoundResult(round=number, memory_entries=len(entries),
                       memory_from_pruner=sum(e.pruned for e in entries),
                       memory=str(memory) if entries else None, test=Success(),
                       skills=_skills_induced(folder))


def _skills_induced(folder: Path) -> int | None:
    """The skills a round induced (``round-R/skills``, one file each), or None where
    the loop ran no skills arm: a row rebuilt before skills were counted gains them."""
    skills = folder / "skills"
    return len(list(skills.glob("*.json"))) if skills.is_dir() else None


def round_arms(report: ImproveReport, benches: list[Bench]) -> list[RoundArm]:
    """The rounds table: each round's benches in order (train, test, test with skills)."""
    by_label = {b.label: b for b in benches}
    arms = []
    for row in report.rounds:
        for part in ROUND_PARTS:
            bench = by_label.get(f"round-{row.round}/{part}")
            if bench is None:
                continue
            # a training bench runs with the memory of the round before; the tests with
            # this round's
            memory = None if row.round == 0 or part == "train" else row.memory_entries
            from_pruner = None if memory is None else row.memory_from_pruner
            arms.append(RoundArm(
                round=row.round, part=part, bench=bench.label, memory_entries=memory,
                memory_from_pruner=from_pruner,
                skills=row.skills if part == "test-skills" else None,
                planned=bench.state.planned, ran=bench.state.ran,
                success=Success.of(bench.results)))
    _train_memory(arms, report)
    return arms


def _train_memory(arms: list[RoundArm], report: ImproveReport) -> None:
    """Round R's training bench ran with round R-1's memory (none in round 1)."""
    entries = {row.round: (row.memory_entries, row.memory_from_pruner)
               for row in report.rounds}
    for arm in arms:
        if arm.part == "train" and arm.round > 1 and arm.round - 1 in entries:
            arm.memory_entries, arm.memory_from_pruner = entries[arm.round - 1]


ROUNDS_HEADER = ["round", "arm", "memory entries (from the pruner)", "skills",
                 "ran / planned", "success % ± SE (successes/judged)", "infra endings",
                 "replayed", "model calls / judged episode"]

ROUNDS_NOTE = ("Success over each bench's agent outcomes, as improve.md counts it: each "
               "episode once, as its last attempt ended; infrastructure endings and tasks "
               "replayed from an earlier round's solution (no model call) are counted "
               "beside it, never in it. A training bench runs with the memory of the "
               "round before, the tests with their round's.")


def round_cells(arm: RoundArm) -> list[str]:
    success = arm.success
    memory = ("–" if arm.memory_entries is None
              else f"{arm.memory_entries} ({arm.memory_from_pruner})")
    planned = "?" if arm.planned is None else str(arm.planned)
    calls = "–" if success.calls_per_episode is None else f"{success.calls_per_episode:.1f}"
    return [str(arm.round), PART_NAMES[arm.part], memory,
            "–" if arm.skills is None else str(arm.skills), f"{arm.ran} / {planned}",
            success_cell(success.model_copy(update={"infrastructure": 0, "replayed": 0})),
            str(success.infrastructure), str(success.replayed), calls]


def rounds_markdown(report: ImproveReport, arms: list[RoundArm]) -> list[str]:
    """The report's opening: what the loop was given, its rounds arm by arm, its notes."""
    table = improve_table(report).split("\n\n", 1)[0]  # the line of tasks, seeds, filter
    out = [table, "", "## Rounds", "",
           md_table(ROUNDS_HEADER, [round_cells(arm) for arm in arms]), "", ROUNDS_NOTE, ""]
    notes = [*report.notes, *report.bench_notes]
    out += [f"Note: {note}" for note in notes]
    return [*out, ""] if notes else out


def rounds_html(report: ImproveReport, arms: list[RoundArm],
                bench_links: dict[str, str]) -> str:
    """The same opening in HTML; each arm's name leads to its bench's own report."""
    def esc(text: str) -> str:
        return html.escape(text, quote=True)

    rows = []
    for arm in arms:
        cells = [esc(cell) for cell in round_cells(arm)]
        base = bench_links.get(arm.bench)
        if base is not None:
            cells[1] = (f'<a href="{esc(base)}/report.html">{cells[1]}</a> '
                        f'(<a href="{esc(base)}/view/index.html">episodes</a>)')
        rows.append(f'<tr data-round="{arm.round}" data-bench="{esc(arm.bench)}">'
                    + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    head = "".join(f"<th>{esc(h)}</th>" for h in ROUNDS_HEADER)
    given = improve_table(report).split("\n\n", 1)[0]
    notes = "".join(f'<p class="note">Note: {esc(note)}</p>'
                    for note in [*report.notes, *report.bench_notes])
    return (f'<p id="given">{esc(given)}</p><h2 id="rounds-heading">Rounds</h2>'
            f'<table id="rounds"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}'
            f'</tbody></table><p class="muted">{esc(ROUNDS_NOTE)}</p>{notes}')


def write_loop_report(improve_dir: Path, report: ImproveReport) -> list[Path]:
    """improve.json and improve.md, as the loop writes them."""
    written = []
    for name, text in ((REPORT_FILE, report.model_dump_json(indent=2)),
                       (TABLE_FILE, improve_table(report))):
        path = improve_dir / name
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
        written.append(path)
    return written
