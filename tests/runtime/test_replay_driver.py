"""The replay driver's rules on real trees, without a browser: what it replays, when it
heals, when it stops, and when it hands the episode to the model."""

from __future__ import annotations

from linewise.locators import locate
from linewise.runtime.browser.observation import Observation
from linewise.runtime.replay.driver import ReplayDriver, rebase
from linewise.runtime.replay.program import Program, ProgramStep
from tests.support.paths import REPO

LOGIN = (REPO / "tests" / "data" / "trees" / "miniwob-login-user.txt").read_text().split("\n")
URL = "http://127.0.0.1:8765/miniwob/login-user.html"


def _program() -> Program:
    steps = [ProgramStep(index=0, action="fill('19', 'ann')", targets=[locate(LOGIN, "19")],
                         url=URL, state_after=[{"value": "ann"}]),
             ProgramStep(index=1, action="click('23')", targets=[locate(LOGIN, "23")], url=URL)]
    return Program(source="test", task_id="t", goal="g", start_url=URL, steps=steps)


def _page(lines: list[str], url: str = URL) -> Observation:
    return Observation(url=url, title="", tabs=[], lines=lines)


def _renamed(lines: list[str]) -> list[str]:
    return [line.replace("'Login'", "'Sign in'") for line in lines]


def test_each_step_replays_on_its_element_and_checks_the_recorded_state() -> None:
    driver = ReplayDriver(_program(), heal=False)
    driver.begin(URL)
    first = driver.plan(_page(LOGIN))
    assert first.decision is not None and str(first.decision.action) == "fill('19', 'ann')"
    driver.ran(first, None)
    # the field did not take the value: the recorded effect is missing
    stopped = driver.plan(_page(LOGIN))
    assert stopped.stop is not None and "value=None (recorded 'ann')" in stopped.stop
    assert driver.summary.divergence == "effect" and driver.summary.diverged_at == 0


def test_a_missing_element_is_healed_twice_then_the_replay_stops_or_hands_over() -> None:
    filled = [line.replace("[19] textbox ''", "[19] textbox '' value='ann'") for line in LOGIN]
    for fallback, last in ((False, "heal_failed"), (True, None)):
        driver = ReplayDriver(_program(), heal=True, fallback=fallback)
        driver.begin(URL)
        driver.ran(driver.plan(_page(LOGIN)), None)
        plans = []
        for _ in range(3):
            plan = driver.plan(_page(_renamed(filled)))
            plans.append(plan)
            if plan.record is not None:
                driver.ran(plan, "no such element")
        assert [p.record.mode if p.record else None for p in plans[:2]] == ["healed"] * 2
        assert plans[0].guidance is not None and "button 'Login'" in plans[0].guidance
        if fallback:
            assert plans[2].stop is None and plans[2].decision is None  # the model's now
            assert driver.summary.fell_back_at == 1
        else:
            assert plans[2].stop is not None and driver.summary.divergence == last


def test_addresses_on_the_recorded_start_move_to_the_new_start() -> None:
    assert rebase("http://127.0.0.1:8000/a/b?x=1#c", "http://127.0.0.1:8000/a/",
                  "http://127.0.0.1:9100/a/") == "http://127.0.0.1:9100/a/b?x=1#c"
    assert rebase("https://other.example/x", "http://127.0.0.1:8000/",
                  "http://127.0.0.1:9100/") == "https://other.example/x"
