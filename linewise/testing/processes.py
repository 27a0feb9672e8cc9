"""The processes a run started, from ``/proc`` (Linux): to kill its Chromium in a chaos
test, and to measure the memory of the runtime and of Chromium in a soak benchmark.

Chromium runs as one browser process (launched with ``--remote-debugging-port``, see
``runtime/browser/chromium.py``) and its helpers (zygote, GPU, network service,
renderers: ``--type=…``), all below it in the process tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


def _stat_fields(pid: int) -> list[str]:
    """The fields of ``/proc/PID/stat`` after the command name (state first)."""
    return (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()


def parent_of(pid: int) -> int | None:
    try:
        return int(_stat_fields(pid)[1])
    except (OSError, ValueError, IndexError):
        return None


def descends_from(pid: int, ancestor: int) -> bool:
    """Whether ``ancestor`` is ``pid`` or one of its ancestors."""
    current: int | None = pid
    while current is not None and current > 1:
        if current == ancestor:
            return True
        current = parent_of(current)
    return False


def _living_pids() -> list[int]:
    pids = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if _stat_fields(int(entry.name))[0] != "Z":
                pids.append(int(entry.name))
        except (OSError, IndexError):
            continue
    return pids


def descendants(ancestor: int) -> list[int]:
    """Every living process below ``ancestor`` (not itself)."""
    return [pid for pid in _living_pids() if pid != ancestor and descends_from(pid, ancestor)]


def chromium_pids(ancestor: int) -> list[int]:
    """Chromium browser processes (not their helpers) below ``ancestor``, oldest first."""
    found: list[tuple[int, int]] = []
    for pid in descendants(ancestor):
        try:
            argv = (PROC / str(pid) / "cmdline").read_bytes().split(b"\0")
            started = int(_stat_fields(pid)[19])
        except (OSError, ValueError, IndexError):
            continue
        if any(a.startswith(b"--remote-debugging-port=") for a in argv) and not any(
            a.startswith(b"--type=") for a in argv
        ):
            found.append((started, pid))
    return [pid for _, pid in sorted(found)]


@dataclass(frozen=True)
class Memory:
    """Resident memory of a group of processes, in MiB."""

    processes: int
    rss_mib: float
    """The sum of each process's RSS: pages shared between them count once per process."""
    pss_mib: float
    """The sum of proportional shares: shared pages split between their users."""


def _kib(path: Path, field: str) -> int:
    for line in path.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def memory_of(pids: list[int]) -> Memory:
    """RSS and PSS of ``pids`` (processes that end meanwhile count as nothing)."""
    rss = pss = counted = 0
    for pid in pids:
        try:
            rss += _kib(PROC / str(pid) / "status", "VmRSS")
            pss += _kib(PROC / str(pid) / "smaps_rollup", "Pss")
        except OSError:
            continue
        counted += 1
    return Memory(counted, rss / 1024, pss / 1024)


def chromium_memory(ancestor: int) -> Memory:
    """Every Chromium process below ``ancestor``: browsers and their helpers."""
    browsers = chromium_pids(ancestor)
    return memory_of([p for b in browsers for p in [b, *descendants(b)]])
