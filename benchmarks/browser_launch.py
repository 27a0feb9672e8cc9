"""What one Chromium costs to start: the full browser in headless mode against Chromium's
headless shell, launched as linewise launches them (its flags, its driver). Run by hand
on a quiet machine; figures go to benchmarks/NOTES.md.

    python benchmarks/browser_launch.py                   # both, six launches each
    python benchmarks/browser_launch.py --runs 10 /opt/chrome/chrome
    python benchmarks/browser_launch.py --trees 0,1       # and what the agent sees

Each launch starts the browser, opens a session, loads a small page, reads its
observation and closes everything. Prints, per executable, the median wall time of a
launch and the CPU seconds it cost this process and its children (Chromium, the driver).

``--trees SEEDS`` also runs each task of ``tasks/miniwob-sample.yaml`` at those seeds for
one step (a scripted ``noop()``, no filter) under each executable, and prints how many
first AXTrees are the same under all of them (the model's first prompt, at temperature
0), naming the tasks whose tree differs.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import json
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path

import yaml

import linewise
from linewise.runtime.browser.chromium import Browser, BrowserConfig
from linewise.runtime.browser.extraction import observe
from linewise.testing import FunctionModel

PAGE = "data:text/html,<h1>Sign in</h1><label>Name <input></label><button>Go</button>"
DEFAULT = ("/usr/bin/chromium", "/usr/bin/chromium-headless-shell")
SAMPLE = Path(__file__).resolve().parent.parent / "tasks" / "miniwob-sample.yaml"


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


async def _launch_once(executable: str) -> float:
    started = time.perf_counter()
    browser = await Browser(BrowserConfig(chromium=executable)).start()
    try:
        session = await browser.new_session()
        await session.page.goto(PAGE)
        await observe(session, screenshot=False)
        await session.close()
    finally:
        await browser.close()
    return time.perf_counter() - started


def _first_trees(executable: str, seeds: list[int]) -> dict[str, str]:
    """Each sample task's first AXTree, as a run on ``executable`` records it."""
    names = [task["miniwob"] for task in yaml.safe_load(SAMPLE.read_text())["tasks"]]
    tasks = [linewise.MiniWoBTask(miniwob=name, seed=seed, max_steps=1)
             for name in names for seed in seeds]
    model = FunctionModel(lambda messages, info: "<think>Look.</think><action>noop()</action>")
    os.environ["LINEWISE_CHROMIUM"] = executable  # BrowserGym's env launches its own
    try:
        with tempfile.TemporaryDirectory() as out:
            asyncio.run(linewise.run(tasks, model=model, filter="none", out_dir=out))
            trees = {}
            for steps in Path(out).rglob("steps.jsonl"):
                with steps.open() as lines:
                    first = json.loads(lines.readline())
                trees[first["task_id"]] = first["axtree"]
    finally:
        del os.environ["LINEWISE_CHROMIUM"]
    return trees


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("executables", nargs="*", default=list(DEFAULT))
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--trees", metavar="SEEDS", default="",
                        help="compare the sample's first AXTrees at these seeds (0,1)")
    args = parser.parse_args()
    installed = [path for path in args.executables if os.access(path, os.X_OK)]
    for executable in args.executables:
        if executable not in installed:
            print(f"{executable}: not installed")
            continue
        cpu = _cpu_seconds()
        walls = [asyncio.run(_launch_once(executable)) for _ in range(args.runs)]
        per_launch = (_cpu_seconds() - cpu) / args.runs
        print(f"{executable}: {statistics.median(walls):.2f} s a launch (median of "
              f"{args.runs}), {per_launch:.2f} CPU-s")
    if args.trees:
        seeds = [int(seed) for seed in args.trees.split(",")]
        runs = [_first_trees(executable, seeds) for executable in installed]
        differ = sorted(task for task in runs[0]
                        if any(run.get(task) != runs[0][task] for run in runs[1:]))
        print(f"first AXTrees the same under {len(installed)} executables: "
              f"{len(runs[0]) - len(differ)} of {len(runs[0])}")
        for task in differ:
            first = runs[0][task].splitlines()
            for executable, run in zip(installed[1:], runs[1:], strict=True):
                other = run.get(task, "").splitlines()
                lines = [line for line in difflib.unified_diff(first, other, lineterm="", n=0)
                         if line[:1] in "+-" and line[:3] not in ("+++", "---")]
                print(f"  {task} on {executable}: {len(lines)} lines differ; "
                      f"{' | '.join(lines[:2])[:160]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
