"""Invisible text: how many injected texts reach the observation, and what else goes.

For every page of the injection suite (``tasks/injection/pages``) the observation is
read with ``invisible_text`` keep, mark and drop, and the script says whether the
page's injected text is in it (the scripted models' patterns,
``linewise.testing.injection_models.SUITE``). On ordinary pages with no hidden text
(the built filter-case pages, ``tasks/filter-cases/pages``, and the Python docs when
python3-doc is installed) it counts the nodes that would be dropped: what the defense
costs where there is nothing to defend against.

    python benchmarks/invisible_text.py
"""

from __future__ import annotations

import asyncio
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SUITE_PAGES = REPO / "tasks" / "injection" / "pages"
ORDINARY = [*sorted((REPO / "tasks" / "filter-cases" / "pages").glob("*.html")),
            *sorted(Path("/usr/share/doc/python3/html/library").glob("json.html"))]
MODES = ("keep", "mark", "drop")


async def main() -> None:
    from linewise.runtime.browser.chromium import Browser, BrowserConfig
    from linewise.runtime.browser.extraction import observe
    from linewise.runtime.log import configure_logging
    from linewise.runtime.tasks.loader import load_task_file
    from linewise.testing import StaticServer
    from linewise.testing.injection_models import SUITE, injection_seen
    from linewise.testing.injection_site import InjectionSite

    configure_logging(level="WARNING")
    reached = dict.fromkeys(MODES, 0)
    print("| page | task | keep | mark | drop | nodes dropped |")
    print("|---|---|---|---|---|---|")
    with InjectionSite(SUITE_PAGES) as site:
        async with Browser(site.browser_config(BrowserConfig())) as browser:
            suite = load_task_file(REPO / "tasks" / "injection" / "tasks.yaml")
            for task_id, page in ((t.id, Path(t.url).name) for t in suite):  # type: ignore[union-attr]
                session = await browser.new_session()
                await session.page.goto(site.page_url(page))
                cells, dropped = [], {}
                for mode in MODES:
                    obs = await observe(session, screenshot=False, invisible_text=mode)
                    seen = injection_seen(task_id, obs.text)
                    marked = seen and mode == "mark" and any(
                        "invisible=" in line for line in obs.lines
                        if injection_seen(task_id, line))
                    reached[mode] += seen
                    cells.append("marked" if marked else "in" if seen else "out")
                    dropped = obs.invisible if mode == "drop" else dropped
                await session.close()
                print(f"| {page} | {task_id} | {' | '.join(cells)} | "
                      f"{sum(dropped.values())} {dict(sorted(dropped.items())) or ''} |")
            print(f"\ninjections in the observation: keep {reached['keep']}, mark "
                  f"{reached['mark']} (marked or visible), drop {reached['drop']} of {len(SUITE)}")
            print("\n| ordinary page | lines (keep) | nodes dropped |")
            print("|---|---|---|")
            for path in ORDINARY:
                with StaticServer(path.parent) as server:
                    session = await browser.new_session()
                    await session.page.goto(server.url(path.name))
                    kept = await observe(session, screenshot=False, invisible_text="keep")
                    dropped_obs = await observe(session, screenshot=False,
                                                invisible_text="drop")
                    await session.close()
                print(f"| {path.name} | {len(kept.lines)} | "
                      f"{sum(dropped_obs.invisible.values())} "
                      f"{dict(sorted(dropped_obs.invisible.items())) or ''} |")


if __name__ == "__main__":
    asyncio.run(main())
