"""The viewer never goes through a symbolic link below the folder it shows: ``linewise
view`` refuses to write through a linked ``view/`` folder or file, and ``--serve`` never
serves a file that a link leads to (out of the run folder, or to a private file of the
run). Real links, real trace folders, the real command and real HTTP requests."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from linewise.cli.main import main
from linewise.records import EpisodeSummary, StepRecord
from linewise.runtime.trace import EpisodeTraceWriter

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16
PRECIOUS = "<html>someone else's page</html>"


def _episode(run: Path, name: str) -> Path:
    folder = run / name
    writer = EpisodeTraceWriter(folder)
    summary = EpisodeSummary(episode_id=f"id-{name}", task_id=name, goal="Click.")
    writer.start(summary)
    shot = writer.write_screenshot(0, PNG)
    writer.write_step(StepRecord(episode_id=summary.episode_id, task_id=name, index=0,
                                 url="http://x.test/", axtree="1|[1] button 'OK'",
                                 observation="[1] button 'OK'", action="click('1')",
                                 screenshot=shot))
    summary.status, summary.success, summary.n_steps = "finished", True, 1
    writer.write_summary(summary)
    return folder


@pytest.fixture
def run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    _episode(run, "ep")
    (run / "run.json").write_text('{"argv": ["secret"]}')
    return run


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A folder of someone else's: nothing of the viewer may land in it."""
    folder = tmp_path / "elsewhere"
    (folder / "sub").mkdir(parents=True)
    (folder / "index.html").write_text(PRECIOUS)
    (folder / "precious.js").write_text(PRECIOUS)
    return folder


def _untouched(folder: Path) -> None:
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")) == [
        "index.html", "precious.js", "sub"]
    assert (folder / "index.html").read_text() == PRECIOUS
    assert (folder / "precious.js").read_text() == PRECIOUS


def test_view_refuses_a_view_folder_that_is_a_link(
    run: Path, elsewhere: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (run / "view").symlink_to(elsewhere)
    assert main(["view", str(run)]) == 2
    error = capsys.readouterr().err
    assert f"{run / 'view'} is a symbolic link (to {elsewhere})" in error
    assert "Traceback" not in error
    _untouched(elsewhere)


@pytest.mark.parametrize(("inside", "target"), [
    ("index.html", "index.html"),            # the index page itself
    ("assets", "sub"),                       # a folder the viewer writes into
    ("data/ep/outline.js", "precious.js"),  # an episode's data file
    ("episodes", "sub"),
])
def test_view_refuses_a_link_inside_its_folder(
    run: Path, elsewhere: Path, capsys: pytest.CaptureFixture[str], inside: str, target: str
) -> None:
    assert main(["view", str(run)]) == 0  # a first, ordinary build
    capsys.readouterr()
    link = run / "view" / inside
    if link.is_dir():
        for child in sorted(link.rglob("*"), reverse=True):
            child.unlink() if child.is_file() else child.rmdir()
        link.rmdir()
    else:
        link.unlink(missing_ok=True)
        link.parent.mkdir(parents=True, exist_ok=True)
    os.utime(run / "ep" / "steps.jsonl")  # the episode's data is written again
    link.symlink_to(elsewhere / target)
    assert main(["view", str(run)]) == 2
    error = capsys.readouterr().err
    assert f"{link} is a symbolic link" in error, error
    _untouched(elsewhere)


def test_a_link_to_the_folder_shown_is_followed(run: Path, tmp_path: Path) -> None:
    """The folder named on the command line may be a link: the user chose it."""
    alias = tmp_path / "latest"
    alias.symlink_to(run)
    assert main(["view", str(alias)]) == 0
    assert (run / "view" / "index.html").is_file()


@pytest.fixture
def served(run: Path, tmp_path: Path) -> Iterator[str]:
    """``linewise view RUN --serve`` in its own process; yields the base URL (with the
    token) once it serves. Links are planted before it starts."""
    outside = tmp_path / "outside"
    (outside / "shots").mkdir(parents=True)
    (outside / "shots" / "step-000.png").write_bytes(b"OUTSIDE-SECRET")
    _episode(outside, "moved")
    # a screenshots folder that is a link out of the run
    linked = _episode(run, "linked-shots")
    for child in (linked / "screenshots").iterdir():
        child.unlink()
    (linked / "screenshots").rmdir()
    (linked / "screenshots").symlink_to(outside / "shots")
    # a screenshot that is a link to a private file of the run
    (run / "ep" / "screenshots" / "step-001.png").symlink_to(run / "run.json")
    # an episode folder that is a link out of the run
    (run / "linked-episode").symlink_to(outside / "moved")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LINEWISE_"))}
    server = subprocess.Popen(
        [sys.executable, "-m", "linewise.cli.main", "view", str(run), "--serve", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert server.stdout is not None
        for line in server.stdout:
            if line.startswith("serving "):
                yield line.split()[1].removesuffix("view/index.html")
                break
        else:
            error = server.stderr.read() if server.stderr else ""
            pytest.fail(f"the server did not start: {error}")
    finally:
        server.terminate()
        server.wait(timeout=10)


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return int(answer.status), answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""


@pytest.mark.slow
def test_serve_never_follows_a_link_out_of_the_folder(served: str) -> None:
    assert _get(f"{served}view/index.html")[0] == 200
    assert _get(f"{served}ep/screenshots/step-000.png") == (200, PNG)
    for linked in ("linked-shots/screenshots/step-000.png",  # the folder is a link out
                   "ep/screenshots/step-001.png",            # the file is a link to run.json
                   "linked-episode/screenshots/step-000.png"):  # the episode is a link out
        status, body = _get(served + linked)
        assert status == 404 and b"SECRET" not in body and b"secret" not in body, linked
