"""Bench throughput: episodes per minute, linewise bench vs BrowserGym's env in threads.

Both sides run the same MiniWoB++ tasks and seeds with the same scripted model (a real
HTTP server speaking the OpenAI protocol, answering every call after a fixed delay, as
a remote model would) and the same agent prompt and parser:

- linewise: ``run_bench`` with the local backend at concurrency 1, 2, 4 (one Chromium,
  one context per episode, asyncio);
- BrowserGym: ``browsergym/miniwob.*`` envs, N threads each running its share of the
  episodes one after another (one env per episode, as AgentLab runs them). BrowserGym
  as it ships: its chat window, its 500 ms action timeouts and the task's slow_mo;
  only what is needed to run here is changed (a Playwright per thread, Debian's
  Chromium).

It also reports how much of an episode's time is the model's: when a call takes over a
second, the runtime should not be the bottleneck (model share close to 1).

    python benchmarks/bench_throughput.py [--delay 1.0] [--episodes 8] [--levels 1 2 4]

Target: at concurrency 4, linewise at least 2x BrowserGym's episodes per minute.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

TASKS = [("click-test", 1), ("click-button", 2), ("enter-text", 0), ("click-button", 50)]
"""(task, first seed); the bench adds 0, 1, 2 … to the seed, so the two click-button
entries start far apart and never run the same episode twice."""


def specs_for(episodes: int) -> list[Any]:
    from linewise.apps.bench.plan import expand
    from linewise.runtime.tasks.schema import MiniWoBTask

    seeds = -(-episodes // len(TASKS))
    tasks = [MiniWoBTask(miniwob=name, seed=seed, max_steps=4) for name, seed in TASKS]
    return expand(tasks, ["none"], seeds)[:episodes]


def linewise_run(base_url: str, episodes: int, concurrency: int) -> dict[str, float]:
    from linewise.apps.bench.driver import run_bench
    from linewise.apps.bench.local import BenchOptions
    from linewise.runtime.browser.chromium import BrowserConfig
    from linewise.runtime.trace import read_summary
    from linewise.settings import EndpointSettings, LinewiseSettings

    endpoint = EndpointSettings(base_url=base_url, model="scripted", max_in_flight=8)
    settings = LinewiseSettings(action=endpoint, retriever=endpoint, screenshots=False)
    with tempfile.TemporaryDirectory() as out:
        started = time.perf_counter()
        outcome = asyncio.run(run_bench(
            specs_for(episodes), settings, BrowserConfig(), Path(out),
            BenchOptions(concurrency=concurrency), argv=["bench_throughput"],
        ))
        wall = time.perf_counter() - started
        results = outcome.results
        times = [read_summary(Path(out) / r.episode_dir).time for r in results
                 if r.episode_dir]
    steps = sum(r.n_steps for r in results)
    runtime_step = sum(t.observe_s + t.act_s + t.filter_s for t in times) / max(steps, 1)
    setup = statistics.fmean(t.wall_s - t.llm_s - t.observe_s - t.act_s - t.filter_s
                             for t in times)
    return {
        "wall_s": wall,
        "per_min": 60 * len(results) / wall,
        "success": sum(bool(r.success) for r in results) / len(results),
        "model_share": statistics.fmean(r.llm_s / r.wall_s for r in results if r.wall_s),
        "episode_s": statistics.fmean(r.wall_s for r in results),
        "steps": statistics.fmean(r.n_steps for r in results),
        "runtime_step_s": runtime_step,
        "model_step_s": sum(t.llm_s for t in times) / max(steps, 1),
        "setup_s": setup,
    }


def browsergym_episode(name: str, seed: int, base_url: str, miniwob_url: str,
                       stats: list[tuple[bool, float, float, int]]) -> None:
    """One episode through BrowserGym's env with the same prompt, parser and model."""
    import openai

    from linewise.agent.prompt import PageView, StepMemory, build_action_messages
    from linewise.agent.response import parse_answer
    from linewise.runtime.envs.browsergym_gym import make_env

    client = openai.OpenAI(base_url=base_url, api_key="x")
    env = make_env(f"browsergym/miniwob.{name}", task_kwargs={"base_url": miniwob_url},
                   slow_mo_ms=None, action_timeout_ms=None, chat="browsergym")
    from browsergym.utils.obs import flatten_axtree_to_str

    started = time.perf_counter()
    llm = 0.0
    steps = 0
    reward = 0.0
    try:
        obs, _ = env.reset(seed=seed)
        history: list[StepMemory] = []
        for _ in range(4):
            text = flatten_axtree_to_str(obs["axtree_object"], with_clickable=True,
                                         extra_properties=obs["extra_element_properties"])
            view = PageView(url=obs["url"], text=text,
                            last_action_error=obs["last_action_error"] or None)
            messages = build_action_messages(obs["goal"], view, history, None)
            asked = time.perf_counter()
            answer = client.chat.completions.create(model="scripted", messages=messages)
            llm += time.perf_counter() - asked
            parsed = parse_answer(answer.choices[0].message.content or "")
            action = str(parsed.action) if parsed.action else "noop()"
            obs, reward, terminated, truncated, _ = env.step(action)
            steps += 1
            history.append(StepMemory(think=parsed.think, action=action,
                                      error=obs["last_action_error"] or None))
            if terminated or truncated:
                break
    finally:
        env.close()
    wall = time.perf_counter() - started
    stats.append((reward > 0, llm, wall, steps))


def browsergym_run(base_url: str, episodes: int, concurrency: int) -> dict[str, float]:
    from linewise.runtime.envs.browsergym_gym import stop_thread_playwright
    from linewise.runtime.tasks.miniwob_server import MiniWoBServer

    work = [(s.task.miniwob, s.seed) for s in specs_for(episodes)]  # type: ignore[union-attr]
    stats: list[tuple[bool, float, float, int]] = []
    server = MiniWoBServer()
    server.start()
    lock = threading.Lock()

    def worker() -> None:
        try:
            while True:
                with lock:
                    if not work:
                        return
                    name, seed = work.pop(0)
                try:
                    browsergym_episode(name, seed, base_url, server.base_url, stats)
                except Exception as exc:
                    print(f"  browsergym episode {name} seed {seed} failed: {exc}")
                    stats.append((False, 0.0, 0.0, 0))
        finally:
            stop_thread_playwright()

    started = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    server.stop()
    return {
        "wall_s": wall,
        "per_min": 60 * len(stats) / wall,
        "success": sum(ok for ok, *_ in stats) / len(stats),
        "model_share": statistics.fmean(llm / w for _, llm, w, _ in stats if w),
        "episode_s": statistics.fmean(w for _, _, w, _ in stats),
        "steps": statistics.fmean(n for *_, n in stats),
    }


def main() -> None:
    from linewise.runtime.log import configure_logging
    from linewise.testing import ScriptedChatServer, miniwob_solver

    configure_logging(json_lines=False, level="WARNING")

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=1.0, help="model latency per call (s)")
    parser.add_argument("--episodes", type=int, default=8, help="episodes per run")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--skip-browsergym", action="store_true")
    args = parser.parse_args()

    rows = []
    with ScriptedChatServer(miniwob_solver, delay_s=args.delay) as llm:
        for level in args.levels:
            ours = linewise_run(llm.base_url, args.episodes, level)
            theirs = (None if args.skip_browsergym
                      else browsergym_run(llm.base_url, args.episodes, level))
            rows.append((level, ours, theirs))
            print(f"concurrency {level}: linewise {ours['per_min']:.1f}/min"
                  + (f", browsergym {theirs['per_min']:.1f}/min" if theirs else ""),
                  flush=True)

    print(f"\n{args.episodes} episodes per run, model delay {args.delay:g} s per call\n")
    header = (f"{'N':>2} {'linewise ep/min':>16} {'episode s':>10} {'model share':>12}"
              f" {'success':>8} {'browsergym ep/min':>18} {'episode s':>10} {'model share':>12}"
              f" {'success':>8} {'ratio':>6}")
    print(header)
    print("-" * len(header))
    for level, ours, theirs in rows:
        line = (f"{level:>2} {ours['per_min']:>16.1f} {ours['episode_s']:>10.1f}"
                f" {ours['model_share']:>12.2f} {ours['success']:>8.0%}")
        if theirs:
            line += (f" {theirs['per_min']:>18.1f} {theirs['episode_s']:>10.1f}"
                     f" {theirs['model_share']:>12.2f} {theirs['success']:>8.0%}"
                     f" {ours['per_min'] / theirs['per_min']:>6.2f}")
        print(line)
    print("\nepisode s: mean wall time of one episode (flat as N grows: no contention);"
          "\nmodel share: the part of an episode's wall time spent waiting for the model.")

    print("\nWhere a linewise episode's time goes (per step: observation + action + filter,"
          "\nagainst the model's call; per episode: context, page and task set-up):\n")
    print(f"{'N':>2} {'runtime s/step':>15} {'model s/step':>13} {'set-up s/episode':>17}"
          f" {'runtime/model':>14}")
    for level, ours, _ in rows:
        print(f"{level:>2} {ours['runtime_step_s']:>15.3f} {ours['model_step_s']:>13.3f}"
              f" {ours['setup_s']:>17.3f}"
              f" {ours['runtime_step_s'] / ours['model_step_s']:>14.2f}")
    print("\nruntime/model under 1: each step waits on the model longer than on the runtime.")


if __name__ == "__main__":
    main()
