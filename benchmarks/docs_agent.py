"""What an observation filter costs an agent on large documentation pages, end to end.

Runs the tasks of ``tasks/docs-agent.yaml`` (30 tasks on pages of Debian's python3-doc,
apache2-doc and valgrind documentation, 1,600 to 8,700 AXTree lines, 30k to 136k tokens,
none of them a page the filters were tuned or held out on) once per ``--filter`` in
real Chromium, and prints a table per filter:

- success over the episodes that ended with an agent outcome (± the standard error of a
  proportion), overall and by kind of task (answer / navigation);
- episodes that ended on an infrastructure fault, counted beside the rate, and among
  all episodes those whose errors say the prompt overflowed the model's context;
- mean steps, median and mean seconds per step, the action model's prompt tokens per
  step with its calls per step (re-asks included: a ``noop()`` repeated on an unchanged
  page is asked again twice, as the runtime does for any futile repeat), the
  retriever's tokens per step;
- the share of steps on which the filter escalated (``notes["escalation"]["level"] > 0``
  in ``steps.jsonl``: the agent got stuck on the previous view and is shown more);
- the observation cut, ``1 - tokens shown / tokens of the full trees`` over all steps.

The action model is one of:

- the embedded model (the default: no endpoint given, linewise starts it);
- any OpenAI-compatible endpoint, ``--endpoint URL --model NAME`` (key from
  ``OPENAI_API_KEY``);
- ``--scripted oracle``: a scripted model behind a real OpenAI-protocol HTTP server
  (linewise.testing's ScriptedChatServer) that answers correctly whenever the view it
  was shown holds what the task needs (``ORACLE``: for an answer task, patterns of the
  lines that hold the answer, all of which must be shown; for a navigation task, the
  entry's anchor, a link to which must be shown) and otherwise says it cannot find it
  and answers ``noop()``, which is what the filters' escalation reacts to. Its success
  is the filter's recall measured end to end; no model runs, except the retriever of
  filters that need one.

The retriever (for filters that need one) is ``--retriever-endpoint URL
--retriever-model NAME``, else the action endpoint, else the embedded model. Filters
default to ``none``, ``truncate`` and ``auto``; a filter that is not registered in
this checkout is skipped with a message.

    python benchmarks/docs_agent.py --scripted oracle --filter none --filter truncate
    python benchmarks/docs_agent.py --filter truncate --only socket-shutdown-both
    python benchmarks/docs_agent.py --endpoint http://localhost:8000/v1 --model M \\
        --out runs/docs-agent --json runs/docs-agent/table.json
    python benchmarks/docs_agent.py --check-pages     # every oracle pattern on its page

``--out DIR`` keeps the traces (``DIR/<filter>/<task>/``; default: a temporary folder,
removed at the end), ``--only ID`` (repeatable) and ``--limit N`` select tasks,
``--json FILE`` writes the table with every episode's result. The documentation is
served from /usr/share/doc on http://127.0.0.1:8771/ (the task file's URLs), or on a
free port with the URLs rewritten when that one is taken.

Set-up: apt-get install python3-doc apache2-doc valgrind (and Chromium, as for linewise).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from linewise.agent.filters.registry import check_filter_name
from linewise.apps.bench.metrics import success_rate
from linewise.errors import ConfigError
from linewise.records import EpisodeSummary, StepRecord
from linewise.runtime.browser.chromium import BrowserConfig
from linewise.runtime.episode import StepContext, StepHooks
from linewise.runtime.filter_choice import filter_needs_retriever
from linewise.runtime.log import configure_logging
from linewise.runtime.run import open_endpoints, run_tasks
from linewise.runtime.tasks.loader import load_task_file
from linewise.runtime.tasks.schema import WebTask
from linewise.runtime.trace import read_steps, read_summary
from linewise.settings import (
    ENDPOINT_VIEW_BUDGET_TOKENS,
    LOCAL_VIEW_BUDGET_TOKENS,
    EndpointSettings,
    LinewiseSettings,
)
from linewise.testing import ScriptedChatServer, StaticServer, prompt_section

TASKS = Path(__file__).resolve().parent.parent / "tasks" / "docs-agent.yaml"
DOCS = Path("/usr/share/doc")
PORT = 8771
BASE_URL = f"http://127.0.0.1:{PORT}/"
"""The base of the task file's URLs: /usr/share/doc served on this port."""
PACKAGES = {"python3-doc": "python3-doc/html/library/index.html",
            "apache2-doc": "apache2-doc/manual/en/mod/index.html",
            "valgrind": "valgrind/html/dist.news.html"}
DEFAULT_FILTERS = ["none", "truncate", "auto"]
EMBEDDED_EPISODE_TIMEOUT_S = 3600.0
"""The embedded model takes about a minute a step on a small CPU: ten times the default."""


# ----------------------------------------------------------------------- the oracle

@dataclass(frozen=True)
class Answer:
    """An answer task: every pattern must match a line of the view (the lines that hold
    the answer); then the oracle sends ``answer``."""

    lines: tuple[str, ...]
    answer: str


@dataclass(frozen=True)
class Open:
    """A navigation task: a link of the view whose URL ends with ``anchor`` is clicked,
    then the oracle says it opened ``name``."""

    anchor: str
    name: str

    @property
    def link(self) -> str:
        """The pattern of a link line to the entry (group 1: its bid, 2: its name)."""
        return rf"\[([A-Za-z0-9]+)\] link '([^']*)', url='[^']*{re.escape(self.anchor)}'"


Oracle = Answer | Open

#: What each task's oracle must see. Patterns are searched in the view's lines with
#: "\xa0" read as a space (valgrind's release notes are non-breaking spaces throughout).
ORACLE: dict[str, Oracle] = {
    "socket-reach-tcp-service": Open("#socket.create_connection", "socket.create_connection"),
    "socket-shutdown-both": Answer(
        (r"StaticText 'SHUT_RDWR'", r"further sends and receives are disallowed"),
        "SHUT_RDWR disallows both further sends and receives."),
    "asyncio-loop-run-later": Open("#asyncio.loop.call_later", "loop.call_later"),
    "asyncio-to-thread": Open("#asyncio.to_thread", "asyncio.to_thread"),
    "asyncio-shield": Answer(
        (r"StaticText 'Protect an'", r"link 'cancelled', url='[^']*#asyncio\.Task\.cancel'"),
        "asyncio.shield() protects an awaitable object from being cancelled."),
    "inspect-code-text": Open("#inspect.getsource", "inspect.getsource"),
    "enum-no-shared-values": Open("#enum.unique", "enum.unique"),
    "doctest-ellipsis": Open("#doctest.ELLIPSIS", "doctest.ELLIPSIS"),
    "operator-fetch-attribute": Open("#operator.attrgetter", "operator.attrgetter"),
    "importlib-reload": Open("#importlib.reload", "importlib.reload"),
    "configparser-other-sections": Open("#configparser.ExtendedInterpolation",
                                        "configparser.ExtendedInterpolation"),
    "curses-safe-setup": Open("#curses.wrapper", "curses.wrapper"),
    "decimal-default-digits": Answer(
        (r"precision \(defaulting to 28 places\)|Context\(prec=28,",),
        "By default the decimal module computes with 28 significant digits."),
    "exceptions-dead-weakref": Answer(
        (r"term 'exception ReferenceError'", r"raised when a weak reference proxy"),
        "ReferenceError"),
    "tarfile-default-format": Answer(
        (r"The default format for creating archives\. This is currently",
         r"link 'PAX_FORMAT'"),
        "tarfile.DEFAULT_FORMAT is currently PAX_FORMAT."),
    "sys-traceback-depth": Answer(
        (r"determines the maximum number of levels of traceback", r"StaticText '1000'"),
        "sys.tracebacklimit defaults to 1000 levels."),
    "urllib-user-agent": Answer(
        (r"default user agent string is", r"StaticText '\"Python-urllib/"),
        'urllib sends "Python-urllib/x.y" (x.y being the Python version) by default.'),
    "apache-proxy-backend-wait": Open("#proxytimeout", "ProxyTimeout"),
    "apache-cache-stampede": Open("#cachelock", "CacheLock"),
    "apache-main-process-id": Open("#pidfile", "PidFile"),
    "apache-rewritemap": Open("#rewritemap", "RewriteMap"),
    "apache-proxy-io-buffer": Answer((r"cell 'ProxyIOBufferSize 8192'",),
                                     "ProxyIOBufferSize defaults to 8192 bytes."),
    "apache-lua-merge-order": Answer((r"cell 'LuaInherit parent-first'",),
                                     "LuaInherit defaults to parent-first."),
    "apache-cache-no-expiry": Answer((r"cell 'CacheDefaultExpire 3600",),
                                     "CacheDefaultExpire: 3600 seconds (one hour)."),
    "apache-listen-backlog": Answer((r"cell 'ListenBackLog 511'",),
                                    "ListenBacklog defaults to 511."),
    "apache-ldap-authz-prefix": Answer((r"cell 'AuthLDAPAuthorizePrefix AUTHORIZE_'",),
                                       "The default prefix is AUTHORIZE_."),
    "valgrind-mac-release": Answer((r"Release 3\.5\.0 \(", r"now works on Mac OS X"),
                                   "Valgrind 3.5.0 was the first to work on Mac OS X."),
    "valgrind-solaris-release": Answer(
        (r"Release 3\.11\.0 \(", r"Support for Solaris/x86 and Solaris/amd64 has been added"),
        "Valgrind 3.11.0."),
    "valgrind-callgrind-release": Answer((r"Release 3\.2\.0 \(", r"Callgrind has been added"),
                                         "Callgrind was added in Valgrind 3.2.0."),
    "valgrind-jit-library": Answer((r"library, called Vex",), "It is called Vex."),
}

OPENED = re.compile(r"thought: Opening the entry '([^']+)'")
CANNOT_FIND = ("<think>I cannot find {what} in this view of the page; I need to see more "
               "of it.</think><action>noop()</action>")


def view_lines(prompt: str) -> list[str]:
    """The lines of the page view an action prompt shows, ``\\xa0`` read as a space."""
    return [line.replace("\\xa0", " ") for line in
            prompt_section(prompt, "Current page").splitlines()]


def matching_lines(lines: Iterable[str], pattern: str) -> list[str]:
    return [line for line in lines if re.search(pattern, line)]


class DocsOracle:
    """The scripted action model: acts on a task only once its view shows what it needs."""

    def __init__(self, tasks: Sequence[WebTask], oracle: dict[str, Oracle] = ORACLE) -> None:
        self.by_goal = {task.goal: oracle[task.id] for task in tasks}

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        if len(messages) == 1:  # the answer check (--answer-check on): no answer in it
            return json.dumps({"answer": None})
        prompt = messages[1]["content"]  # later messages are re-asks of the same step
        spec = self.by_goal[prompt_section(prompt, "Goal").strip()]
        lines = view_lines(prompt)
        if isinstance(spec, Answer):
            if all(matching_lines(lines, pattern) for pattern in spec.lines):
                return (f"<think>The view shows the answer.</think>"
                        f"<action>send_msg_to_user({spec.answer!r})</action>")
            return CANNOT_FIND.format(what="the part of the page that answers this")
        history = prompt_section(prompt, "History of your previous steps")
        if OPENED.search(history):
            return (f"<think>The entry of {spec.name} is open.</think>"
                    f"<action>send_msg_to_user('I opened the entry of {spec.name}.')</action>")
        for line in lines:
            link = re.search(spec.link, line)
            if link is not None:
                return (f"<think>Opening the entry '{link.group(2)}'.</think>"
                        f"<action>click('{link.group(1)}')</action>")
        return CANNOT_FIND.format(what=f"a link to the entry of {spec.name}")


# ------------------------------------------------------------------------ the tasks

def load_tasks(base_url: str = BASE_URL, path: Path = TASKS) -> list[WebTask]:
    """The benchmark's tasks, their URLs moved from ``BASE_URL`` to ``base_url``."""
    tasks = [t for t in load_task_file(path) if isinstance(t, WebTask)]
    return [t.model_copy(update={"url": base_url + t.url.removeprefix(BASE_URL)})
            for t in tasks]


def select_tasks(tasks: list[WebTask], only: Sequence[str] | None,
                 limit: int | None) -> list[WebTask]:
    if only:
        unknown = sorted(set(only) - {t.id for t in tasks})
        if unknown:
            raise SystemExit(f"unknown task ids: {', '.join(unknown)}")
        tasks = [t for t in tasks if t.id in only]
    return tasks[:limit] if limit is not None else tasks


def missing_packages() -> list[str]:
    return [name for name, probe in PACKAGES.items() if not (DOCS / probe).exists()]


@contextlib.contextmanager
def serve_docs(port: int = PORT) -> Iterator[str]:
    """/usr/share/doc on localhost: on ``port`` if it is free, else on any free port."""
    try:
        server = StaticServer(DOCS, port=port)
    except OSError:
        print(f"port {port} is taken: serving the documentation on another port "
              "(URLs rewritten; prompts then differ from other runs by the port)",
              file=sys.stderr)
        server = StaticServer(DOCS)
    with server:
        yield server.url()


def known_filters(names: Sequence[str]) -> list[str]:
    """The registered ones among ``names``; the others are skipped with a message."""
    known = []
    for name in dict.fromkeys(names):
        try:
            check_filter_name(name)
        except ConfigError as exc:
            print(f"skipping filter {name!r}: not registered in this checkout ({exc})",
                  file=sys.stderr)
            continue
        known.append(name)
    return known


# ------------------------------------------------------------------------ the table

CONTEXT_OVERFLOW = re.compile(
    r"(exceed\w*|maximum|max|available)\s+(the\s+)?context|context[\s_](length|size|window)"
    r"|n_ctx|too many tokens|prompt is too long",
    re.IGNORECASE,
)
"""An error that says the prompt did not fit the model's context (llama.cpp, OpenAI,
vLLM wordings)."""


def escalation_level(notes: Any) -> int:
    """The escalation level a filter recorded in its notes, wherever it nested it."""
    if isinstance(notes, dict):
        found = notes.get("escalation")
        if isinstance(found, dict) and isinstance(found.get("level"), int):
            return int(found["level"])
        return max((escalation_level(value) for value in notes.values()), default=0)
    return 0


def step_errors(step: StepRecord) -> list[str]:
    errors = [call.error for call in step.llm_calls if call.error]
    errors += [e for e in (step.action_error, step.parse_error) if e]
    if step.failure is not None:
        errors.append(step.failure.message)
    return errors


@dataclass
class Episode:
    """One episode as the table needs it, read back from its trace folder."""

    summary: EpisodeSummary
    steps: list[StepRecord]
    kind: str
    """``answer`` or ``navigate``: how the task is checked."""

    @property
    def context_overflow(self) -> bool:
        errors = [self.summary.error or ""] + [e for s in self.steps for e in step_errors(s)]
        return any(CONTEXT_OVERFLOW.search(e) for e in errors)


def task_kind(task: WebTask) -> str:
    return "navigate" if task.success is not None and task.success.url_contains else "answer"


def read_episodes(run_dir: Path, summaries: Sequence[EpisodeSummary],
                  tasks: Sequence[WebTask]) -> list[Episode]:
    """The episodes of ``summaries`` with their steps, from ``run_dir``."""
    kinds = {t.id: task_kind(t) for t in tasks}
    folders = {}
    for path in run_dir.glob("*/summary.json"):
        folders[read_summary(path.parent).episode_id] = path.parent
    return [Episode(s, read_steps(folders[s.episode_id]) if s.episode_id in folders else [],
                    kinds.get(s.task_id, "answer"))
            for s in summaries]


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def summarize(name: str, episodes: Sequence[Episode], wall_s: float) -> dict[str, Any]:
    """One row of the table: the filter's figures over its episodes."""
    agent = [e for e in episodes if e.summary.outcome == "agent"]
    rate, se = success_rate(e.summary.success is True for e in agent)
    steps = [s for e in episodes for s in e.steps]
    seconds = [s.timings.total_ms / 1000 for s in steps]
    action_calls = [c for s in steps for c in s.llm_calls if c.purpose == "action"]
    action_prompt = sum(c.prompt_tokens for c in action_calls)
    retriever = sum(c.prompt_tokens + c.completion_tokens for s in steps for c in s.llm_calls
                    if c.purpose == "retriever")
    shown = sum(s.obs_tokens_shown for s in steps)
    full = sum(s.obs_tokens_full for s in steps)
    by_kind = {}
    for kind in ("answer", "navigate"):
        of_kind = [e for e in agent if e.kind == kind]
        by_kind[kind] = [sum(e.summary.success is True for e in of_kind), len(of_kind)]
    return {
        "filter": name,
        "episodes": len(episodes),
        "agent_episodes": len(agent),
        "success": rate,
        "success_se": se,
        "solved": sum(e.summary.success is True for e in agent),
        "by_kind": by_kind,
        "infrastructure": sum(e.summary.outcome == "infrastructure" for e in episodes),
        "infra_kinds": sorted({e.summary.infra_kind or "" for e in episodes
                               if e.summary.outcome == "infrastructure"}),
        "other_endings": sum(e.summary.outcome in ("budget", "stopped") for e in episodes),
        "context_overflow": sum(e.context_overflow for e in episodes),
        "mean_steps": _mean([e.summary.n_steps for e in agent]),
        "median_s_per_step": statistics.median(seconds) if seconds else None,
        "mean_s_per_step": _mean(seconds),
        "action_prompt_tokens_per_step": action_prompt / len(steps) if steps else None,
        "action_calls_per_step": len(action_calls) / len(steps) if steps else None,
        "retriever_tokens": retriever,
        "retriever_tokens_per_step": retriever / len(steps) if steps else None,
        "escalated_share": (sum(escalation_level(s.filter_result.notes) > 0 for s in steps)
                            / len(steps)) if steps else None,
        "obs_cut": 1 - shown / full if full else None,
        "obs_tokens_shown_per_step": shown / len(steps) if steps else None,
        "obs_tokens_full_per_step": full / len(steps) if steps else None,
        "wall_s": round(wall_s, 1),
        "results": [{
            "task_id": e.summary.task_id, "kind": e.kind, "success": e.summary.success,
            "outcome": e.summary.outcome, "termination": e.summary.termination,
            "steps": e.summary.n_steps, "error": e.summary.error,
            "context_overflow": e.context_overflow,
            "escalated_steps": sum(escalation_level(s.filter_result.notes) > 0
                                   for s in e.steps),
        } for e in episodes],
    }


def _fmt(value: float | None, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def table(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| filter | success (agent outcomes) | answer | navigate | infra (context overflow) "
        "| mean steps | s/step median / mean | action prompt tok/step (calls) "
        "| retriever tok/step | escalated steps | obs cut | wall |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        rate = "–" if row["success"] is None else (
            f"{row['success']:.1%} ± {_fmt(row['success_se'], '.1%')} "
            f"({row['solved']}/{row['agent_episodes']})")
        answer, navigate = (f"{ok}/{n}" for ok, n in (row["by_kind"]["answer"],
                                                        row["by_kind"]["navigate"]))
        infra = f"{row['infrastructure']} ({row['context_overflow']})"
        if row["other_endings"]:
            infra += f", {row['other_endings']} stopped"
        lines.append(
            f"| {row['filter']} | {rate} | {answer} | {navigate} | {infra} "
            f"| {_fmt(row['mean_steps'], '.2f')} "
            f"| {_fmt(row['median_s_per_step'], '.1f')} / {_fmt(row['mean_s_per_step'], '.1f')} "
            f"| {_fmt(row['action_prompt_tokens_per_step'], ',.0f')} "
            f"({_fmt(row['action_calls_per_step'], '.1f')}) "
            f"| {_fmt(row['retriever_tokens_per_step'], ',.0f')} "
            f"| {_fmt(row['escalated_share'], '.0%')} | {_fmt(row['obs_cut'], '.0%')} "
            f"| {row['wall_s']:.0f} s |")
    for row in rows:
        failed = [r["task_id"] for r in row["results"] if r["success"] is not True]
        if failed:
            lines.append(f"{row['filter']}: not solved: {', '.join(failed)}")
    return "\n".join(lines)


# ------------------------------------------------------------------------ the run

class Progress(StepHooks):
    """One line on stderr per step: the embedded model's runs are long."""

    def __init__(self, filter_name: str) -> None:
        self.filter_name = filter_name

    async def after_act(self, step: StepContext) -> None:
        print(f"[{self.filter_name}] {step.task_id} step {step.index + 1}: {step.action}",
              file=sys.stderr, flush=True)


def endpoint_settings(args: argparse.Namespace) -> LinewiseSettings:
    """The action and retriever endpoints the flags ask for (no URL: the embedded model)."""
    key = os.environ.get("OPENAI_API_KEY")
    action = EndpointSettings()
    if args.endpoint:
        action = EndpointSettings(base_url=args.endpoint, model=args.model, api_key=key)
    retriever = EndpointSettings()
    if args.retriever_endpoint:
        retriever = EndpointSettings(base_url=args.retriever_endpoint, api_key=key,
                                     model=args.retriever_model or args.model)
    elif args.endpoint and not args.scripted:
        retriever = action
    embedded = action.base_url is None and not args.scripted
    timeout = args.episode_timeout or (EMBEDDED_EPISODE_TIMEOUT_S if embedded else None)
    settings = LinewiseSettings(action=action, retriever=retriever, screenshots=False,
                                agent={"view_budget_tokens": args.view_budget})
    if timeout is not None:
        settings = settings.model_copy(update={"episode_timeout_s": timeout})
    return settings


async def run_benchmark(args: argparse.Namespace, out: Path) -> list[dict[str, Any]]:
    filters = known_filters(args.filter or DEFAULT_FILTERS)
    if not filters:
        raise SystemExit("no registered filter to run")
    settings = endpoint_settings(args)
    rows = []
    async with contextlib.AsyncExitStack() as stack:
        base_url = stack.enter_context(serve_docs(args.port))
        tasks = select_tasks(load_tasks(base_url), args.only, args.limit)
        # the action endpoint is opened here, so filters that want a retriever get one
        need_retriever = any(filter_needs_retriever(name, settings.filter, endpoint_opened=True)
                             for name in filters)
        if args.scripted:
            oracle = stack.enter_context(ScriptedChatServer(DocsOracle(tasks), model="oracle"))
            settings = settings.model_copy(update={"action": EndpointSettings(
                base_url=oracle.base_url, model=oracle.model)})
        action, retriever = await stack.enter_async_context(
            open_endpoints(settings, action=True, retriever=need_retriever))
        for name in filters:
            started = time.monotonic()
            summaries = await run_tasks(
                tasks, settings.with_filter(name), out / name,
                browser_config=BrowserConfig(headless=True), action_model=action,
                retriever_model=retriever, hooks=[Progress(name)])
            episodes = read_episodes(out / name, summaries, tasks)
            rows.append(summarize(name, episodes, time.monotonic() - started))
            print(table(rows[-1:]), file=sys.stderr, flush=True)
    return rows


# ------------------------------------------------------------------ page checks

async def check_pages(port: int) -> int:
    """Render every task's page and check its oracle: each answer pattern matches a
    line of the full tree, each navigation task has a link to its anchor. Prints where
    (line / lines, and the token offset of the first match) and returns the failures."""
    from linewise.runtime.browser.chromium import Browser
    from linewise.runtime.browser.extraction import observe
    from linewise.tokens import count_tokens

    failures = 0
    with serve_docs(port) as base_url:
        tasks = load_tasks(base_url)
        async with Browser(BrowserConfig(headless=True)) as browser:
            pages: dict[str, list[str]] = {}
            for task in tasks:
                if task.url not in pages:
                    session = await browser.new_session()
                    await session.page.goto(task.url)
                    pages[task.url] = (await observe(session, screenshot=False)).lines
                    await session.close()
                raw = pages[task.url]
                lines = [line.replace("\\xa0", " ") for line in raw]
                spec = ORACLE[task.id]
                patterns = spec.lines if isinstance(spec, Answer) else (spec.link,)
                total = count_tokens("\n".join(raw))
                where = []
                for pattern in patterns:
                    hits = [i for i, line in enumerate(lines) if re.search(pattern, line)]
                    if not hits:
                        failures += 1
                        where.append(f"NO MATCH for {pattern!r}")
                        continue
                    offset = count_tokens("\n".join(raw[:hits[0]]))
                    where.append(f"{len(hits)} hit(s), first at line {hits[0] + 1} "
                                 f"(token {offset:,} = {offset / total:.0%})")
                print(f"{task.id}: {len(lines):,} lines, {total:,} tokens; "
                      + "; ".join(where))
    return failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--filter", action="append",
                        help=f"a registered filter (repeatable; default {DEFAULT_FILTERS})")
    parser.add_argument("--scripted", choices=["oracle"],
                        help="the action model is the scripted oracle (see the docstring)")
    parser.add_argument("--endpoint", help="an OpenAI-compatible action endpoint "
                        "(default: the embedded model)")
    parser.add_argument("--model", help="the endpoint's model")
    parser.add_argument("--retriever-endpoint", help="an OpenAI-compatible retriever "
                        "endpoint (default: the action endpoint, else the embedded model)")
    parser.add_argument("--retriever-model", help="the retriever endpoint's model")
    parser.add_argument("--view-budget", type=int, metavar="N", help="the action model's "
                        f"view budget (default: {LOCAL_VIEW_BUDGET_TOKENS} for the embedded model, "
                        f"{ENDPOINT_VIEW_BUDGET_TOKENS} otherwise)")
    parser.add_argument("--out", type=Path, help="keep the traces here (DIR/<filter>/<task>)")
    parser.add_argument("--only", action="append", metavar="ID", help="run this task "
                        "(repeatable)")
    parser.add_argument("--limit", type=int, help="run the first N (selected) tasks")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the table here")
    parser.add_argument("--episode-timeout", type=float, metavar="S",
                        help="wall-clock limit per episode (default 600 s, and "
                        f"{EMBEDDED_EPISODE_TIMEOUT_S:.0f} s for the embedded model)")
    parser.add_argument("--port", type=int, default=PORT,
                        help="serve the documentation on this port if it is free")
    parser.add_argument("--check-pages", action="store_true",
                        help="only check every oracle pattern against its rendered page")
    parser.add_argument("--verbose", action="store_true", help="linewise's info logs")
    args = parser.parse_args()
    if args.endpoint and not args.model:
        parser.error("--endpoint needs --model")
    if args.scripted and args.endpoint:
        parser.error("--scripted replaces the action endpoint: give one or the other")
    if missing := missing_packages():
        sys.exit(f"missing documentation: apt-get install {' '.join(missing)}")
    configure_logging(json_lines=False, level="INFO" if args.verbose else "WARNING")
    if args.check_pages:
        sys.exit(1 if asyncio.run(check_pages(args.port)) else 0)
    with contextlib.ExitStack() as stack:
        out = args.out or Path(stack.enter_context(tempfile.TemporaryDirectory(
            prefix="docs-agent-")))
        out.mkdir(parents=True, exist_ok=True)
        rows = asyncio.run(run_benchmark(args, out))
        print(table(rows))
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps({"argv": sys.argv, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
