"""Do skills carry over to a seed they were not built from? Measured on training seeds
only, with no model. Run by hand; figures go to benchmarks/NOTES.md.

For each seed ``k`` of a bench folder (the embedded model's MiniWoB++ sample on its
training seeds, say 0–4), the skills are induced from the solved episodes of the *other*
seeds (``linewise skills build`` on those alone), and every task of the bench is run at
seed ``k`` with those skills started by the goal (``skill_start`` goal) and a model
that never acts: it reports the task infeasible. An episode succeeds only if a skill
solved it. Leaving one seed out shows which tasks' skills generalise across seeds
without touching the seeds a skills arm is tested on (10–14 in issue 35's target).

    python benchmarks/skills_transfer.py /work/runs/s22/train0-4 --out /work/runs/s23/transfer

Prints, per task, the seeds a skill solved and the seeds a skill was offered for, and
the totals with the standard error of a proportion.

``--offered`` runs no browser: for each seed ``k`` and each task the bench ran at ``k``
(solved or not), whether a skill induced from the other seeds is offered for that
episode's goal on its first recorded page (the goal fits a template and the
precondition holds). A skill must be offered before it can solve; this part of the
skills arm's reach takes seconds to measure.

    python benchmarks/skills_transfer.py /work/runs/s23/improve/round-1/train --offered
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from linewise.apps.skills.induce import induce_skills, task_template
from linewise.runtime.replay.program import load_programs
from linewise.runtime.replay.skill import SkillLibrary, write_skill
from linewise.runtime.run import run
from linewise.runtime.tasks.schema import MiniWoBTask
from linewise.runtime.trace import read_steps, read_summary
from linewise.settings import LinewiseSettings
from linewise.testing.function_model import CallInfo, FunctionModel

NEVER_ACTS = ("<think>No skill solved it; this model does not act.</think>"
              "<action>report_infeasible('no skill')</action>")


def never_acts(messages: list[dict[str, Any]], info: CallInfo) -> str:
    return NEVER_ACTS


def rate(successes: int, n: int) -> str:
    if n == 0:
        return "– (0/0)"
    p = successes / n
    return f"{100 * p:.1f}% ± {100 * math.sqrt(p * (1 - p) / n):.1f} ({successes}/{n})"


async def measure(bench: Path, out: Path, max_steps: int) -> int:
    programs = load_programs(bench)
    seeds = sorted({int((p.task or {}).get("seed", -1)) for p in programs} - {-1})
    templates = sorted({task_template(p) for p in programs})
    if not seeds:
        print(f"{bench}: no solved MiniWoB++ episode with a seed", file=sys.stderr)
        return 2
    solved: dict[str, list[int]] = defaultdict(list)
    offered: dict[str, list[int]] = defaultdict(list)
    calls = 0
    for seed in seeds:
        others = [p for p in programs if (p.task or {}).get("seed") != seed]
        skills = induce_skills(others)
        folder = out / f"skills-without-seed{seed}"
        for skill in skills:
            write_skill(skill, folder)
        tasks = [MiniWoBTask.model_validate({"miniwob": t, "seed": seed, "max_steps": max_steps})
                 for t in templates]
        settings = LinewiseSettings()
        settings = settings.model_copy(update={"agent": settings.agent.model_copy(
            update={"skills": folder, "skill_start": "goal"})})
        model = FunctionModel(never_acts)
        summaries = await run(tasks, model=model, filter="none", settings=settings,
                              out_dir=out / f"seed{seed}")
        calls += len(model.requests)
        for task, summary in zip(tasks, summaries, strict=True):
            if summary.skill_steps:
                offered[task.miniwob].append(seed)
            if summary.success:
                solved[task.miniwob].append(seed)
    print("| task | solved by a skill (seeds) | a skill ran (seeds) |")
    print("|---|---|---|")
    for template in templates:
        print(f"| {template} | {solved[template] or '–'} | {offered[template] or '–'} |")
    n = len(templates) * len(seeds)
    total = sum(len(v) for v in solved.values())
    print(f"\nsolved by skills alone: {rate(total, n)}; tasks with a solved episode in "
          f"training: {len(templates)}; seeds {seeds}; model calls (infeasible reports) "
          f"{calls}")
    return 0


def measure_offered(bench: Path) -> int:
    programs = load_programs(bench)
    episodes: dict[int, list[tuple[str, str, list[str]]]] = defaultdict(list)
    for summary_path in sorted(bench.rglob("summary.json")):
        if any(part.startswith("_") for part in summary_path.relative_to(bench).parts):
            continue
        summary = read_summary(summary_path.parent)
        task = summary.task or {}
        if not isinstance(task.get("miniwob"), str) or not isinstance(task.get("seed"), int):
            continue
        steps = read_steps(summary_path.parent)
        if steps:
            episodes[task["seed"]].append((task["miniwob"], summary.goal, steps[0].tree_lines()))
    offered: dict[str, list[int]] = defaultdict(list)
    asked: dict[str, list[int]] = defaultdict(list)
    for seed in sorted(episodes):
        library = SkillLibrary(induce_skills(
            p for p in programs if (p.task or {}).get("seed") != seed))
        for template, goal, lines in episodes[seed]:
            asked[template].append(seed)
            if library.offered(goal, lines):
                offered[template].append(seed)
    print("| task | offered (seeds) | episodes (seeds) |")
    print("|---|---|---|")
    for template in sorted(asked):
        print(f"| {template} | {offered[template] or '–'} | {asked[template]} |")
    n = sum(len(v) for v in asked.values())
    print(f"\noffered: {rate(sum(len(v) for v in offered.values()), n)} of the bench's "
          f"episodes; seeds {sorted(episodes)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bench", type=Path, help="a bench folder of MiniWoB++ episodes")
    parser.add_argument("--out", type=Path, help="where the skills and episodes go "
                        "(not with --offered)")
    parser.add_argument("--max-steps", type=int, default=6)
    parser.add_argument("--offered", action="store_true",
                        help="no browser: which episodes a skill is offered for")
    args = parser.parse_args(argv)
    if args.offered:
        return measure_offered(args.bench)
    if args.out is None:
        parser.error("--out is needed to run the episodes")
    return asyncio.run(measure(args.bench, args.out, args.max_steps))


if __name__ == "__main__":
    raise SystemExit(main())
