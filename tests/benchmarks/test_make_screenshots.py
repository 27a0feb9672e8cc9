"""benchmarks/make_screenshots.py makes the documentation's pictures from the current
build: run on a temporary folder, it writes both, of the sizes the pages show, and they
show steps numbered from 0 and today's step prompt (its goal and view lines)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
SHOTS = Path("/tmp/see-shots")


@pytest.fixture(scope="module")
def make_screenshots() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "make_screenshots", ROOT / "benchmarks" / "make_screenshots.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
async def test_the_documentation_pictures_are_made_from_the_current_build(
    make_screenshots: ModuleType, tmp_path: Path,
) -> None:
    screens = await make_screenshots.make_screenshots(tmp_path)
    shown = {"viewer.png": "traces-and-viewer.md", "step-through.png": "debugging.md"}
    for picture in (screens.viewer, screens.step_through):
        # the files the pages show, where make_screenshots writes them (docs/)
        page = (ROOT / "docs" / shown[picture.name]).read_text(encoding="utf-8")
        assert f"]({picture.name})" in page and (ROOT / "docs" / picture.name).is_file()
        assert picture.stat().st_size > 10_000
    assert Image.open(screens.viewer).size == (1400, 900)
    width, height = Image.open(screens.step_through).size
    assert 1200 <= width <= 1500 and 300 <= height <= 700

    # the viewer: the last of two steps is step 1, and the timeline counts from 0
    assert screens.viewer_step_label == "step 1 (2 of 2)"
    assert screens.viewer_timeline == ["0", "1"]
    # the prompt as it is today, numbered from 0: the goal and the view lines
    terminal = screens.terminal
    assert re.findall(r"^=== step (\d+) · Counter · ", terminal, re.M) == ["0", "1"]
    assert "goal:    Apply twice" in terminal
    assert "view:    the model saw all " in terminal and "(filter: truncate)" in terminal
    assert re.search(r"target:  \[\d+\] button 'Apply' \(line \d+ of the tree, shown to "
                     r"the model, boxed in the browser\)", terminal)
    assert "=== step 2" not in terminal and "step 2/" not in terminal
    SHOTS.mkdir(exist_ok=True)
    for picture in (screens.viewer, screens.step_through):
        (SHOTS / f"docs-{picture.name}").write_bytes(picture.read_bytes())
