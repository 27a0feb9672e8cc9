"""How the trace viewer copes with a long episode on a huge page.

Builds a synthetic 30-step episode whose every step holds a ~23,000-line AXTree
(tests/data/trees/docs-functions.txt three times over; the line filter keeps a few
hundred lines, adds ancestors and guard lines, and each step changes a few lines),
writes its viewer, then opens it in headless Chromium and measures:

- the viewer's size on disk (page, outline, per-step data files);
- time to the first paint and to the first step's tree drawn;
- time to show each next step (ArrowRight, until its tree is drawn).

    python benchmarks/viewer_load.py [--steps 30] [--copies 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

from linewise.apps.viewer.build import write_viewer
from linewise.axtree import number_lines
from linewise.records import EpisodeSummary, FilterRecord, LLMCall, StepRecord, TargetBox
from linewise.runtime.browser.chromium import Browser
from linewise.runtime.trace import EpisodeTraceWriter

TREE = Path(__file__).resolve().parent.parent / "tests" / "data" / "trees" / "docs-functions.txt"


def synthetic_episode(folder: Path, steps: int, copies: int) -> int:
    base = TREE.read_text(encoding="utf-8").splitlines() * copies
    rng = random.Random(7)
    writer = EpisodeTraceWriter(folder)
    summary = EpisodeSummary(episode_id="bench", task_id="synthetic.docs", filter="lines")
    writer.start(summary)
    for index in range(steps):
        lines = list(base)
        for n in rng.sample(range(len(lines)), 5):  # the page changes a little every step
            lines[n] = lines[n] + f" (changed at step {index})"
        starts = sorted(rng.sample(range(1, len(lines) - 60), 8))
        kept = [(s, s + rng.randint(5, 50)) for s in starts]
        record = StepRecord(
            episode_id="bench", task_id="synthetic.docs", index=index, url="file:///docs",
            axtree=number_lines(lines), axtree_lines=len(lines),
            observation="\n".join(lines[a - 1] for a, _ in kept),
            filter="lines",
            filter_result=FilterRecord(
                name="lines", ranges=kept, kept_ranges=kept,
                kept_lines=sum(b - a + 1 for a, b in kept), total_lines=len(lines),
                context_lines=sorted(rng.sample(range(1, len(lines)), 40)),
                notes={"guard_added_lines": [kept[0][0] + 1]},
            ),
            llm_calls=[LLMCall(purpose="action", model="m", base_url="http://x",
                               messages=[{"role": "user", "content": "goal " * 500}],
                               response="<action>click('314')</action>", prompt_tokens=600)],
            action="click('314')", target_box=TargetBox(x=10, y=20, width=80, height=20),
        )
        writer.write_step(record)
        summary.add_step(record)
    summary.status, summary.termination = "finished", "max_steps"
    writer.write_summary(summary)
    return len(base)


def folder_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


async def measure(index: Path, steps: int) -> dict[str, float]:
    async with Browser() as browser:
        session = await browser.new_session()
        page = session.page
        await page.set_viewport_size({"width": 1400, "height": 900})
        started = time.perf_counter()
        await page.goto(index.as_uri())
        await page.wait_for_selector("body[data-shown='0']")
        first_step_ms = (time.perf_counter() - started) * 1000
        paint = await page.evaluate(
            "() => performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? -1"
        )
        rows = await page.locator("#tree .row").count()
        per_step = []
        for i in range(1, steps):
            t = time.perf_counter()
            await page.keyboard.press("ArrowRight")
            await page.wait_for_selector(f"body[data-shown='{i}']")
            per_step.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        await page.click("[data-mode=diff]")
        await page.wait_for_selector("#tree .row.add")
        diff_ms = (time.perf_counter() - t) * 1000
        heap = await page.evaluate("() => performance.memory?.usedJSHeapSize ?? -1")
        await session.close()
    return {
        "first_contentful_paint_ms": round(paint, 1),
        "first_step_drawn_ms": round(first_step_ms, 1),
        "tree_rows_in_dom": rows,
        "next_step_median_ms": round(statistics.median(per_step), 1),
        "next_step_max_ms": round(max(per_step), 1),
        "diff_vs_previous_ms": round(diff_ms, 1),
        "js_heap_mb": round(heap / 2**20, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--copies", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="build the episode here and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp) / "episode"
        lines = synthetic_episode(folder, args.steps, args.copies)
        t = time.perf_counter()
        index = write_viewer(folder)
        build_s = time.perf_counter() - t
        view = folder / "view"
        step_files = sorted((view / "data" / "episode").glob("step-*.js"))
        results = {
            "steps": args.steps,
            "tree_lines": lines,
            "steps_jsonl_mb": round((folder / "steps.jsonl").stat().st_size / 2**20, 1),
            "viewer_mb": round(folder_size(view) / 2**20, 1),
            "page_and_outline_kb": round(
                (index.stat().st_size + (view / "data/episode/outline.js").stat().st_size)
                / 1024, 1),
            "step_file_mb": round(statistics.mean(p.stat().st_size for p in step_files) / 2**20,
                                  2),
            "build_s": round(build_s, 2),
            **asyncio.run(measure(index, args.steps)),
        }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
