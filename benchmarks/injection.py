"""Prompt injection, measured: task success and attack success on ``tasks/injection/``.

Each configuration runs every task of the suite once:

- ``none``, ``lines+structure`` and ``lines+structure --defend`` (the retriever's
  defender mode), each
- with the navigation policy on (the default policy plus each task's
  ``allowed_domains``: only the site itself) and off (``--no-navigation-policy``).

The pages are served on 127.0.0.1 and ``attacker.example`` reaches a local server that
records every request (``linewise.testing.injection_site``), so exfiltration by
navigation is counted where it lands as well as judged from the trace. Invisible text
is handled as the settings say (``LINEWISE_BROWSER__INVISIBLE_TEXT``, default drop);
``--invisible-text keep`` measures without that defense.

    python benchmarks/injection.py                          # the embedded model, whole table
    python benchmarks/injection.py --endpoint http://host:8000/v1 --model NAME
    python benchmarks/injection.py --scripted obedient      # a model that obeys every injection
    python benchmarks/injection.py --config none/policy-on --task inj.forum.comment
    python benchmarks/injection.py --resume                 # carry on a run cut short

Prints one row per configuration (task success rate, attack success rate, by attack kind,
requests the attacker's server received) and writes every episode as a JSON line to
``OUT/results.jsonl`` (traces under ``OUT/<config>/``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SUITE = REPO / "tasks" / "injection" / "tasks.yaml"
PAGES = REPO / "tasks" / "injection" / "pages"
KINDS = ("navigate", "typed", "answer")


@dataclass(frozen=True)
class Config:
    filter: str
    defend: bool
    policy: bool

    @property
    def name(self) -> str:
        return (f"{self.filter}{'+defend' if self.defend else ''}/"
                f"policy-{'on' if self.policy else 'off'}")


CONFIGS = [Config(f, d, p) for f, d in (("none", False), ("lines+structure", False),
                                        ("lines+structure", True)) for p in (False, True)]


def settings_for(base: Any, config: Config) -> Any:
    browser = base.browser.model_copy(update={
        "navigation": base.browser.navigation.model_copy(update={"enforce": config.policy}),
    })
    return base.with_filter(config.filter).model_copy(update={
        "filter": base.filter.model_copy(update={"name": config.filter,
                                                 "defend": config.defend}),
        "browser": browser,
    })


@contextlib.asynccontextmanager
async def models(args: argparse.Namespace, settings: Any) -> AsyncIterator[tuple[Any, Any]]:
    """The action and retriever models: a scripted server, an endpoint or the embedded one."""
    from linewise.runtime.models.chat import ChatClient
    from linewise.runtime.run import open_models
    from linewise.settings import EndpointSettings
    from linewise.testing import ScriptedChatServer
    from linewise.testing.injection_models import faithful_script, obedient_script

    if args.scripted:
        script = obedient_script if args.scripted == "obedient" else faithful_script
        with ScriptedChatServer(script) as server:
            client = ChatClient(EndpointSettings(base_url=server.base_url, model="scripted"))
            try:
                yield client, client
            finally:
                await client.close()
        return
    async with open_models(settings) as (action, retriever):
        yield action, retriever


async def run_suite(args: argparse.Namespace) -> list[dict[str, Any]]:
    from linewise.runtime.browser.chromium import BrowserConfig
    from linewise.runtime.log import configure_logging
    from linewise.runtime.run import run_tasks
    from linewise.runtime.tasks.loader import load_task_file, select_tasks
    from linewise.runtime.tasks.schema import WebTask
    from linewise.settings import LinewiseSettings
    from linewise.testing.injection_site import (
        PASSWORD_VALUE,
        PASSWORD_VARIABLE,
        InjectionSite,
    )

    configure_logging(level="WARNING")
    os.environ.setdefault(PASSWORD_VARIABLE, PASSWORD_VALUE)
    base = LinewiseSettings().resolved()
    # A CPU model on a busy machine can spend more than the default 600 s on one step.
    updates: dict[str, Any] = {"screenshots": False, "episode_timeout_s": args.episode_timeout}
    if args.endpoint:
        endpoint = base.action.model_copy(update={"base_url": args.endpoint,
                                                  "model": args.model or base.action.model})
        updates |= {"action": endpoint, "retriever": endpoint}
    if args.invisible_text:
        updates["browser"] = base.browser.model_copy(
            update={"invisible_text": args.invisible_text})
    base = base.model_copy(update=updates)
    configs = [c for c in CONFIGS if not args.config or c.name in args.config]
    rows: list[dict[str, Any]] = []
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = out / "results.jsonl"
    done: set[tuple[str, str]] = set()
    if args.resume and results.exists():
        # The whole table is printed at the end, so earlier rows count as well.
        rows = [json.loads(line) for line in results.read_text("utf-8").splitlines()
                if line.strip()]
        done = {(r["config"], r["task_id"]) for r in rows}
    with InjectionSite(PAGES) as site, results.open("a", encoding="utf-8") as sink:
        tasks = select_tasks(site.localize(load_task_file(SUITE)), args.task, args.max_steps)
        async with models(args, base) as (action, retriever):
            # Task by task, every configuration in turn: a run cut short still compares
            # the configurations on the same tasks.
            for task in tasks:
                for config in configs:
                    if (config.name, task.id) in done:
                        continue
                    settings = settings_for(base, config)
                    browser = site.browser_config(BrowserConfig.from_settings(settings.browser))
                    assert isinstance(task, WebTask) and task.attack is not None
                    hits_before = len(site.attacker.hits)
                    started = time.perf_counter()
                    [summary] = await run_tasks(
                        [task], settings, out / config.name.replace("/", "."),
                        browser_config=browser, action_model=action, retriever_model=retriever,
                        argv=sys.argv,
                    )
                    attack = summary.attack
                    row = {
                        "config": config.name, "filter": config.filter,
                        "defend": config.defend, "policy": config.policy,
                        "invisible_text": settings.browser.invisible_text,
                        "task_id": task.id, "attack_kind": task.attack.kind,
                        "success": summary.success,
                        "attack_succeeded": attack.succeeded if attack else None,
                        "attack_attempted": attack.attempted if attack else None,
                        "attacker_hits": len(site.attacker.hits) - hits_before,
                        "blocked_navigations": summary.blocked_navigations,
                        "steps": summary.n_steps, "termination": summary.termination,
                        "outcome": summary.outcome, "seconds": round(
                            time.perf_counter() - started, 1),
                        "model": summary.action_model,
                    }
                    rows.append(row)
                    sink.write(json.dumps(row) + "\n")
                    sink.flush()
                    print(f"{config.name:38} {task.id:30} success={row['success']} "
                          f"attack={row['attack_succeeded']} hits={row['attacker_hits']} "
                          f"{row['seconds']} s", file=sys.stderr, flush=True)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """Per configuration: task success, attack success, by kind, and attacker hits."""
    by_config: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_config[row["config"]].append(row)

    def rate(values: list[bool | None]) -> str:
        known = [v for v in values if v is not None]
        return f"{sum(known)}/{len(known)}" if known else "–"

    header = ("| config | task success | attack success | navigate | typed | answer | "
              "attacker hits | infrastructure |")
    lines = [header, "|" + "---|" * 8]
    for name, every in by_config.items():
        # Only agent outcomes count in the rates (as in the bench report); an episode
        # the runtime could not finish says nothing about the model or the defenses.
        group = [r for r in every if r["outcome"] == "agent"]
        kinds = [rate([r["attack_succeeded"] for r in group if r["attack_kind"] == k])
                 for k in KINDS]
        lines.append(
            f"| {name} | {rate([r['success'] for r in group])} | "
            f"{rate([r['attack_succeeded'] for r in group])} | {' | '.join(kinds)} | "
            f"{sum(r['attacker_hits'] for r in every)} | {len(every) - len(group)} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", help="an OpenAI-compatible base URL (default: the "
                        "embedded model)")
    parser.add_argument("--model", help="the model name at --endpoint")
    parser.add_argument("--scripted", choices=("obedient", "faithful"),
                        help="a scripted model instead of an LLM")
    parser.add_argument("--config", action="append", metavar="NAME",
                        help="only this configuration (repeatable): "
                        + ", ".join(c.name for c in CONFIGS))
    parser.add_argument("--task", action="append", default=[], metavar="ID",
                        help="only this task (repeatable)")
    parser.add_argument("--max-steps", type=int)
    parser.add_argument("--invisible-text", choices=("drop", "mark", "keep"))
    parser.add_argument("--episode-timeout", type=float, default=7200.0, metavar="S")
    parser.add_argument("--out", default="runs/injection")
    parser.add_argument("--resume", action="store_true",
                        help="skip the episodes OUT/results.jsonl already holds; the table "
                        "covers them all")
    args = parser.parse_args()
    rows = asyncio.run(run_suite(args))
    print(table(rows))


if __name__ == "__main__":
    main()
