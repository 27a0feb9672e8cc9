"""``bench.json``: what a bench folder is for, and what became of every run on it.

- ``planned``: every episode of the bench's plan, as ``[task_id, seed, filter]``. A
  later run into the folder may run a part of the plan (``--task``), never an episode
  outside it: two plans in one folder would make one report of two benches, so
  ``check_manifest`` refuses such a run.
- ``resume``: the command that continues the bench (its invocation with ``--resume``
  and ``--out``) and the folder it was run from (its paths may be relative); set by
  the runs of the whole plan, as a run of a part would resume only that part.
- ``invocations``: every run on the folder, each with ``ended``: why it stopped
  (``StopReason``), its details and its counts; ``null`` while it runs, so a run killed
  outright (SIGKILL, a power cut) is one whose ``ended`` stayed ``null``.

The report reads all three (``report_data.bench_state``): planned, ran and left, why
the bench stopped, and how to resume it.
"""

from __future__ import annotations

import json
import os
import shlex
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from linewise.apps.bench.options import BenchOptions
from linewise.apps.bench.plan import EpisodeKey, EpisodeSpec
from linewise.errors import ConfigError
from linewise.runtime.redaction import redact_argv, redact_data
from linewise.runtime.run import environment_manifest, write_private
from linewise.settings import LinewiseSettings

MANIFEST_FILE = "bench.json"

StopReason = Literal["finished", "interrupted", "outage", "budget", "refused", "disk",
                     "crashed"]
"""Why a run on a bench folder stopped: it ran every episode it set out to run
(``finished``), the user stopped it (first or second Ctrl+C), the model endpoint stayed
down too long (``outage``), its run budget was spent, the endpoint refused the key or
model (``refused``), the disk refused its trace (``disk``), or an error of linewise's
own ended it (``crashed``)."""


class RunEnd(BaseModel):
    """How one run on the folder ended."""

    reason: StopReason
    detail: str = ""
    at: str = Field(default_factory=lambda: datetime.now().isoformat(timespec="seconds"))
    ran: int = Field(default=0, description="Episodes this run ended (results lines).")
    left: int = Field(default=0, description="Episodes of the plan it left without a line.")


class Invocation(BaseModel):
    model_config = ConfigDict(extra="ignore")

    argv: list[str] = Field(default_factory=list)
    started_at: str = ""
    ended: RunEnd | None = None
    recorded_end: bool = Field(
        default=False, description="Whether this run was to record its end (``ended`` "
        "null then means it was killed or is still running; runs from before linewise "
        "recorded ends have no ``ended`` key at all).")


class ResumeCommand(BaseModel):
    argv: list[str]
    cwd: str = ""

    def text(self) -> str:
        return shlex.join(self.argv)


class BenchManifest(BaseModel):
    """What the report reads of ``bench.json`` (the rest is for people)."""

    model_config = ConfigDict(extra="ignore")

    episodes: int = 0
    planned: list[tuple[str, int, str]] | None = None
    """None in folders written before the plan was recorded (only its size is known)."""
    resume: ResumeCommand | None = None
    invocations: list[Invocation] = Field(default_factory=list)

    @property
    def plan(self) -> set[EpisodeKey] | None:
        return None if self.planned is None else {EpisodeKey(*k) for k in self.planned}


def read_manifest(out_dir: Path) -> BenchManifest | None:
    """The folder's ``bench.json``; None when it has none or it cannot be read."""
    path = out_dir / MANIFEST_FILE
    try:
        data = json.loads(path.read_bytes())
        if isinstance(data, dict):
            for invocation in data.get("invocations") or []:
                if isinstance(invocation, dict):
                    invocation["recorded_end"] = "ended" in invocation
        return BenchManifest.model_validate(data)
    except (OSError, ValueError, ValidationError, RecursionError):
        return None


def resume_command(argv: list[str], out_dir: Path, cwd: str | None = None) -> ResumeCommand:
    """The command that continues a bench run as ``argv`` (from ``cwd``, by default
    this process's folder): the same command with ``--resume`` and ``--out DIR`` (a
    bench without ``--out`` wrote into a new timestamped folder, which a rerun would
    not find again). A command that is not ``bench`` (``improve``) is given as it was
    run."""
    cwd = os.getcwd() if cwd is None else cwd
    words = list(argv[1:])
    if "bench" not in words:
        return ResumeCommand(argv=["linewise", *words], cwd=cwd)
    words = words[words.index("bench"):]
    if not any(w == "--out" or w.startswith("--out=") for w in words):
        words += ["--out", str(out_dir)]
    if not {"--resume", "--retry-errors"} & set(words):
        words.append("--resume")
    return ResumeCommand(argv=["linewise", *words], cwd=cwd)


def check_manifest(out_dir: Path, settings: LinewiseSettings, resume: bool,
                   specs: list[EpisodeSpec]) -> None:
    """Refuse to mix two agents' results, or two plans, in one folder; ``--resume``
    needs a bench."""
    path = out_dir / MANIFEST_FILE
    if not path.exists():
        if resume:
            raise ConfigError(f"--resume: {out_dir} holds no bench ({MANIFEST_FILE} missing)")
        return
    previous = json.loads(path.read_text(encoding="utf-8"))
    model = previous.get("action_model")
    if model and settings.action.model and model != settings.action.model:
        raise ConfigError(
            f"{out_dir} holds results of action model {model!r}, not "
            f"{settings.action.model!r}: use another --out"
        )
    manifest = read_manifest(out_dir)
    plan = manifest.plan if manifest is not None else None
    if plan is None:
        return  # a folder from before plans were recorded: nothing to compare with
    outside = [s.key for s in specs if s.key not in plan]
    if outside:
        carry_on = (f": {manifest.resume.text()}"
                    if manifest is not None and manifest.resume is not None
                    else " with the task file, seeds and filters it was made with")
        raise ConfigError(
            f"{out_dir} holds another bench: {len(outside)} of the {len(specs)} episodes "
            f"asked for are not in its plan of {len(plan)} (first: {outside[0]}). Use "
            f"another --out, or continue that bench{carry_on}"
        )


def write_manifest(
    out_dir: Path,
    settings: LinewiseSettings,
    specs: list[EpisodeSpec],
    *,
    backend: str,
    options: BenchOptions,
    argv: list[str],
    memory_overlap: list[str] | None = None,
) -> None:
    """``bench.json`` at the start of a run: the plan and every invocation that worked
    on this folder, this one's end still ``null``."""
    path = out_dir / MANIFEST_FILE
    previous = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    recorded = read_manifest(out_dir) if previous else None
    plan = recorded.plan if recorded is not None else None
    whole = plan is None or {s.key for s in specs} == plan
    planned: list[tuple[str, int, str]] = (
        [(s.key.task_id, s.key.seed, s.key.filter) for s in specs]
        if plan is None or recorded is None
        else list(recorded.planned or []))
    invocation = {
        "argv": redact_argv(argv),
        "started_at": datetime.now().isoformat(timespec="seconds"),
        "backend": backend,
        "concurrency": options.concurrency,
        "episode_timeout_s": options.episode_timeout_s,
        "episodes": len(specs),
        "ended": None,
    }
    resume = (resume_command(redact_argv(argv), out_dir).model_dump() if whole
              else previous.get("resume"))
    manifest = {
        "action_model": settings.action.model or previous.get("action_model"),
        "retriever_model": settings.retriever.model,
        "filters": sorted({filter_name for _, _, filter_name in planned}),
        "episodes": len(planned),
        "planned": planned,
        "resume": resume,
        **({"memory_overlap": memory_overlap} if memory_overlap else {}),
        **environment_manifest(settings),
        "invocations": [*previous.get("invocations", []), invocation],
    }
    write_private(path, json.dumps(redact_data(manifest), indent=2))


def record_end(out_dir: Path, end: RunEnd) -> None:
    """Set the last invocation's ``ended`` in ``bench.json``. Raises
    ``TraceWriteError`` when the folder cannot be written."""
    path = out_dir / MANIFEST_FILE
    manifest = json.loads(path.read_text(encoding="utf-8"))
    invocations = manifest.get("invocations") or []
    if not invocations:
        return
    invocations[-1]["ended"] = end.model_dump(mode="json")
    write_private(path, json.dumps(manifest, indent=2))
