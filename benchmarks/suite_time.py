"""Wall time of the test suite on a fresh clone: the fast lane and the whole suite, in one
process (as CI and the contributing page run them) or spread over pytest-xdist workers.
Run by hand on a quiet machine; figures go to benchmarks/NOTES.md (never a timed
assertion in a test).

    python benchmarks/suite_time.py                       # a fresh clone of HEAD, serial
    python benchmarks/suite_time.py --workers 0 2         # serial, then two workers
    python benchmarks/suite_time.py --lane fast           # the fast lane only

Clones the repository into a temporary folder (committed work only, as CI sees it),
creates its venv and runs ``linewise setup --xvfb`` there once, then times each lane
with each worker count (``-n N`` of pytest-xdist; 0 runs in one process). Prints, per
run, the wall time, pytest's own summary line and the slowest tests it reported.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LANES = {"fast": ["-m", "not slow"], "whole": []}


def _run(command: list[str], cwd: Path) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    return time.perf_counter() - started, done.stdout + done.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[0],
                        help="pytest-xdist worker counts to time (0: one process)")
    parser.add_argument("--lane", choices=[*LANES, "both"], default="both")
    parser.add_argument("--keep", action="store_true", help="keep the clone")
    args = parser.parse_args()
    lanes = list(LANES) if args.lane == "both" else [args.lane]

    folder = Path(tempfile.mkdtemp(prefix="linewise-suite-"))
    clone = folder / "linewise"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    setup_s, out = _run(["bash", "-c", "python3 -m venv .venv && .venv/bin/pip install -q -e "
                         "'.[model,embedding,test]' && .venv/bin/linewise setup --xvfb"], clone)
    print(f"set-up (venv, install, linewise setup): {setup_s:.0f} s")
    for lane in lanes:
        for workers in args.workers:
            command = [".venv/bin/pytest", *LANES[lane], "-n", str(workers)]
            wall, out = _run(command, clone)
            summary = [line for line in out.splitlines()
                       if re.search(r"\d+ (passed|failed)", line)]
            print(f"\n{lane} lane, -n {workers}: {wall / 60:.1f} min ({wall:.0f} s)")
            print("  " + (summary[-1].strip("= ") if summary else "no pytest summary"))
            slowest = out.split("slowest 15 durations", 1)[-1].splitlines()[1:6]
            for line in slowest:
                print(f"    {line}")
    if not args.keep:
        subprocess.run(["rm", "-rf", str(folder)], check=False)
    else:
        print(f"\nclone kept: {clone}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
