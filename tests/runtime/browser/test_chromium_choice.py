"""Which Chromium a run launches: a headless run prefers Chromium's headless shell, a
headed run never takes it, and a Chromium the user named is launched as named."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from linewise.errors import ConfigError
from linewise.runtime.browser import chromium
from linewise.runtime.browser.chromium import Browser, BrowserConfig, find_chromium
from linewise.runtime.browser.extraction import observe


def _executable(folder: Path, name: str) -> str:
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_headless_prefers_the_shell_headed_takes_the_browser_and_a_named_one_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shell = _executable(tmp_path, "chromium-headless-shell")
    full = _executable(tmp_path, "chromium")
    monkeypatch.delenv("LINEWISE_CHROMIUM", raising=False)
    monkeypatch.setattr(chromium, "HEADLESS_SHELL_CANDIDATES", (shell,))
    monkeypatch.setattr(chromium, "CHROMIUM_CANDIDATES", (full,))
    assert find_chromium(headless=True) == shell
    assert find_chromium(headless=False) == full
    assert find_chromium() == full
    named = _executable(tmp_path, "my-chrome")
    assert find_chromium(named, headless=True) == named
    monkeypatch.setenv("LINEWISE_CHROMIUM", named)
    assert find_chromium(headless=True) == named
    # Without a shell, a headless run launches the full browser as before.
    monkeypatch.delenv("LINEWISE_CHROMIUM")
    monkeypatch.setattr(chromium, "HEADLESS_SHELL_CANDIDATES", (str(tmp_path / "absent"),))
    assert find_chromium(headless=True) == full


@pytest.mark.skipif(not os.access("/usr/bin/chromium-headless-shell", os.X_OK),
                    reason="Chromium's headless shell is not installed (linewise setup adds it)")
async def test_a_headless_browser_runs_on_the_shell_and_reads_a_page(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("LINEWISE_CHROMIUM", raising=False)
    browser = await Browser(BrowserConfig(headless=True)).start()
    try:
        assert browser.executable_path == "/usr/bin/chromium-headless-shell"
        session = await browser.new_session()
        await session.page.goto(
            "data:text/html,<h1>Sign in</h1><label>Name <input></label><button>Go</button>")
        text = (await observe(session, screenshot=False)).text
        assert "textbox 'Name'" in text and "button 'Go'" in text
        await session.close()
    finally:
        await browser.close()


def test_setup_keeps_a_shell_it_finds_and_leaves_a_named_chromium_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``linewise setup`` installs nothing when the shell is there, and nothing when the
    user named a Chromium (that one is launched for headless runs too)."""
    from linewise.runtime import install

    installed: list[list[str]] = []
    monkeypatch.setattr(install, "apt_install", installed.append)
    shell = _executable(tmp_path, "chromium-headless-shell")
    monkeypatch.setattr(install, "HEADLESS_SHELL_CANDIDATES", (shell,))
    assert install.ensure_headless_shell() == shell
    monkeypatch.setattr(install, "HEADLESS_SHELL_CANDIDATES", (str(tmp_path / "absent"),))
    monkeypatch.setenv("LINEWISE_CHROMIUM", shell)
    assert install.ensure_headless_shell() is None
    assert installed == []
    # A distribution without the package leaves headless runs on the full browser.
    monkeypatch.delenv("LINEWISE_CHROMIUM")

    def refused(packages: list[str]) -> None:
        installed.append(packages)
        raise ConfigError("apt-get install -y chromium-headless-shell failed with exit code 100")

    monkeypatch.setattr(install, "apt_install", refused)
    monkeypatch.setattr(install.shutil, "which", lambda name: "/usr/bin/apt-get"
                        if name == "apt-get" else None)
    assert install.ensure_headless_shell() is None
    assert installed == [["chromium-headless-shell"]]
