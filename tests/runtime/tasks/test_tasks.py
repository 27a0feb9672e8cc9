"""Task files: the shipped files load, and every broken file names file, task and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from linewise.errors import ConfigError, TaskFileError
from linewise.runtime.tasks.loader import (
    adhoc_task,
    load_task_file,
    select_tasks,
)
from linewise.runtime.tasks.miniwob_server import available_tasks
from linewise.runtime.tasks.schema import (
    DEFAULT_MAX_STEPS,
    BrowserGymTask,
    MiniWoBTask,
    SuccessCheck,
    Task,
    WebTask,
)
from tests.support.paths import DATA, REPO

ROOT = REPO
BROKEN = DATA / "tasks"

# Tasks that need pixel coordinates, drags or canvas drawing: not in the shipped lists.
PIXEL_TASKS = {
    "bisect-angle",
    "chase-circle",
    "circle-center",
    "click-pie",
    "click-pie-nodelay",
    "find-midpoint",
    "hot-cold",
    "moving-items",
    "right-angle",
    "resize-textarea",
}
PIXEL_PREFIXES = ("drag-", "draw-", "use-colorwheel", "use-slider", "highlight-text")


def write(tmp_path: Path, text: str, name: str = "tasks.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- shipped files


def test_demo_file_has_four_easy_seeded_miniwob_tasks() -> None:
    tasks = load_task_file(ROOT / "tasks" / "demo.yaml")

    assert len(tasks) == 4
    assert all(isinstance(task, MiniWoBTask) for task in tasks)
    assert all(5 <= task.max_steps <= 8 for task in tasks)
    assert {task.miniwob for task in tasks} <= set(available_tasks())
    assert tasks[0].id == f"miniwob.{tasks[0].miniwob}.seed{tasks[0].seed}"


def test_miniwob_file_is_broad_and_avoids_pixel_tasks() -> None:
    tasks = load_task_file(ROOT / "tasks" / "miniwob.yaml")

    names = [task.miniwob for task in tasks if isinstance(task, MiniWoBTask)]
    assert len(names) == len(tasks) >= 35
    assert len(set(names)) == len(names)
    assert not set(names) & PIXEL_TASKS
    assert not [name for name in names if name.startswith(PIXEL_PREFIXES)]
    # defaults: seed 0 for every task, max_steps from defaults unless overridden
    assert {task.seed for task in tasks if isinstance(task, MiniWoBTask)} == {0}
    by_name = {task.miniwob: task for task in tasks if isinstance(task, MiniWoBTask)}
    assert by_name["click-test"].max_steps == 10
    assert by_name["book-flight"].max_steps > 10


# --------------------------------------------------------------------------- schema


def test_web_and_miniwob_tasks_with_defaults(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
defaults:
  max_steps: 7
  seed: 4
tasks:
  - id: docs
    url: https://docs.python.org/3/
    goal: |
      Find the asyncio docs.
    success:
      url_contains: asyncio
  - miniwob: click-test
  - id: custom
    miniwob: enter-text
    seed: 9
    max_steps: 3
""",
    )
    web, mini, custom = load_task_file(path)

    assert isinstance(web, WebTask)
    assert web.kind == "web"
    assert web.goal == "Find the asyncio docs."
    assert web.max_steps == 7
    assert web.success == SuccessCheck(url_contains="asyncio")
    assert isinstance(mini, MiniWoBTask)
    assert mini.kind == "miniwob"
    assert (mini.id, mini.seed, mini.max_steps) == ("miniwob.click-test.seed4", 4, 7)
    assert isinstance(custom, MiniWoBTask)
    assert (custom.id, custom.seed, custom.max_steps) == ("custom", 9, 3)
    assert all(isinstance(task, Task) for task in (web, mini, custom))


def test_max_steps_defaults_to_15(tmp_path: Path) -> None:
    path = write(tmp_path, "tasks:\n  - {id: a, url: 'https://a.example/', goal: g}\n")

    (task,) = load_task_file(path)

    assert task.max_steps == DEFAULT_MAX_STEPS == 15


def test_yaml_merge_keys_are_allowed(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
tasks:
  - &base {id: a, url: "https://a.example/", goal: g}
  - {<<: *base, id: b}
""",
    )

    assert [task.id for task in load_task_file(path)] == ["a", "b"]


# --------------------------------------------------------------------------- broken files


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("unknown_key.yaml", ["tasks[1] (id 'login')", "unknown key 'gaol'", "'goal'", "line 8"]),
        ("missing_goal.yaml", ["tasks[0] (id 'home')", "missing field 'goal'"]),
        ("bad_yaml.yaml", ["invalid YAML", "line 6"]),
        (
            "unknown_miniwob.yaml",
            [
                "tasks[1] (id 'miniwob.clik-test.seed3')",
                "field 'miniwob'",
                "unknown MiniWoB++ task 'clik-test'",
                "did you mean 'click-test'",
            ],
        ),
        ("duplicate_ids.yaml", ["tasks[1] (id 'home')", "duplicate id", "tasks[0]"]),
        (
            "bad_values.yaml",
            [
                "tasks[0] (id 'docs')",
                "field 'url'",
                "https://docs.python.org",
                "field 'max_steps'",
                "field 'success.url_matches'",
                "regular expression",
            ],
        ),
    ],
)
def test_broken_file_names_file_task_and_field(name: str, expected: list[str]) -> None:
    path = BROKEN / name

    with pytest.raises(TaskFileError) as info:
        load_task_file(path)

    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert info.value.path == str(path)
    for fragment in expected:
        assert fragment in message


def test_unknown_key_message_format() -> None:
    with pytest.raises(TaskFileError) as info:
        load_task_file(BROKEN / "unknown_key.yaml")

    # The suggestion stands in for the "missing field 'goal'" it explains.
    assert str(info.value) == (
        f"{BROKEN / 'unknown_key.yaml'}: tasks[1] (id 'login'): "
        "unknown key 'gaol' (did you mean 'goal'?) (line 8)"
    )


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"

    with pytest.raises(TaskFileError, match=r"nope\.yaml: no such file"):
        load_task_file(path)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "the file is empty"),
        ("- a\n- b\n", "got a list"),
        ("defaults: {max_steps: 3}\n", "missing field 'tasks'"),
        ("tasks: []\n", "at least one task"),
        ("tasks:\n  - hello\n", "tasks[0]: the entry must be a mapping, got a string"),
        ("tasks:\n  - miniwob: click-test\n", "tasks[0]: missing field 'seed'"),
        (
            "defaults: {max_steps: 0, goal: x}\ntasks:\n  - {miniwob: click-test, seed: 1}\n",
            "defaults: unknown key 'goal'",
        ),
        (
            "defaults: {max_steps: 0}\ntasks:\n  - {miniwob: click-test, seed: 1}\n",
            "defaults: field 'max_steps'",
        ),
        (
            "tasks:\n  - {id: a, url: 'https://a.example/', goal: x, goal: y}\n",
            "duplicate key 'goal'",
        ),
        (
            "tasks:\n  - {id: a, url: 'https://a.example/', goal: g, seed: 3}\n",
            "tasks[0] (id 'a'): unknown key 'seed'",
        ),
        (
            "tasks:\n  - {miniwob: click-test, seed: 1, url: 'https://a.example/'}\n",
            "tasks[0] (id 'miniwob.click-test.seed1'): unknown key 'url'",
        ),
        (
            "tasks:\n  - {id: a, url: 'https://a.example/', goal: g, success: {}}\n",
            "field 'success': give at least one of",
        ),
        (
            "tasks:\n  - {id: a, url: 'https://a.example/', goal: g, success: {url_contain: x}}\n",
            "unknown key 'success.url_contain' (did you mean 'url_contains'?)",
        ),
        (
            "tasks:\n  - {id: a, url: 'https://a.example/', goal: g, max_steps: true}\n",
            "field 'max_steps'",
        ),
        ("tasks:\n  - {id: 'a b', url: 'https://a.example/', goal: g}\n", "field 'id'"),
        ("tasks:\n  - {miniwob: click-test, seed: -1}\n", "field 'seed'"),
    ],
)
def test_invalid_content(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text)

    with pytest.raises(TaskFileError) as info:
        load_task_file(path)

    assert str(info.value).startswith(f"{path}: ")
    assert expected in str(info.value)


def test_every_problem_is_reported(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
tasks:
  - {id: a, url: "https://a.example/"}
  - {id: b, url: "https://b.example/", goal: g, colour: red}
""",
    )

    with pytest.raises(TaskFileError) as info:
        load_task_file(path)

    message = str(info.value)
    assert "tasks[0] (id 'a'): missing field 'goal'" in message
    assert "tasks[1] (id 'b'): unknown key 'colour'" in message
    assert message.index("tasks[0]") < message.index("tasks[1]")


# --------------------------------------------------------------------------- browsergym entries


def test_browsergym_entries_load_with_defaults(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
defaults: {max_steps: 4, seed: 2}
tasks:
  - browsergym: browsergym/webarena.310
  - {id: open, browsergym: openended, task_kwargs: {start_url: "https://a.example/"}}
  - {id: web, url: "https://a.example/", goal: g}
""",
    )
    arena, open_ended, web = load_task_file(path)

    assert isinstance(arena, BrowserGymTask) and arena.kind == "browsergym"
    assert (arena.id, arena.seed, arena.max_steps) == ("browsergym.webarena.310.seed2", 2, 4)
    assert (arena.env_id, arena.family) == ("browsergym/webarena.310", "webarena")
    assert isinstance(open_ended, BrowserGymTask)
    assert open_ended.task_kwargs == {"start_url": "https://a.example/"}
    assert isinstance(web, WebTask) and web.max_steps == 4


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "tasks:\n  - {browsergym: webarena.310, sede: 3}\n",
            "tasks[0] (id 'browsergym.webarena.310.seed0'): unknown key 'sede' "
            "(did you mean 'seed'?) (line 2)",
        ),
        (
            "tasks:\n  - browsergym: webarna.310\n",
            "tasks[0] (id 'browsergym.webarna.310.seed0'): field 'browsergym': unknown "
            "BrowserGym benchmark 'webarna'",
        ),
        (
            "tasks:\n  - {browsergym: miniwob.click-test}\n  - {browsergym: miniwob.click-test}\n",
            "tasks[1] (id 'browsergym.miniwob.click-test.seed0'): duplicate id, already used by "
            "tasks[0]",
        ),
        ("tasks:\n  - {browsergym: webarena.310, seed: -1}\n", "field 'seed'"),
        ("tasks:\n  - {browsergym: webarena.310, max_steps: 0}\n", "field 'max_steps'"),
    ],
)
def test_browsergym_entries_get_the_same_detailed_errors(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = write(tmp_path, text)

    with pytest.raises(TaskFileError) as info:
        load_task_file(path)

    assert str(info.value).startswith(f"{path}: ")
    assert expected in str(info.value)


# --------------------------------------------------------------------------- selection


def test_select_tasks_keeps_file_order_and_overrides_max_steps() -> None:
    tasks = [
        WebTask(id="a", url="https://a.example/", goal="g"),
        MiniWoBTask(id="b", miniwob="click-test", seed=0),
        BrowserGymTask(id="c", browsergym="webarena.310"),
    ]

    assert select_tasks(tasks, [], None) == tasks
    chosen = select_tasks(tasks, ["c", "a"], 3)
    assert [(t.id, t.max_steps) for t in chosen] == [("a", 3), ("c", 3)]
    assert [t.max_steps for t in tasks] == [DEFAULT_MAX_STEPS] * 3  # copies, not edits
    with pytest.raises(ConfigError, match=r"--task: no task with id x, y; the ids are: a, b, c$"):
        select_tasks(tasks, ["y", "a", "x"], None)
    many = [WebTask(id=f"t{n}", url="https://a.example/", goal="g") for n in range(40)]
    with pytest.raises(ConfigError, match=r"the ids are: t0, t1, .*, t29 and 10 more$"):
        select_tasks(many, ["nope"], None)
    with pytest.raises(ConfigError, match="--max-steps must be at least 1"):
        select_tasks(tasks, [], 0)


# --------------------------------------------------------------------------- success checks


def test_success_check_all_conditions_must_hold() -> None:
    check = SuccessCheck(
        url_contains="/orders/",
        url_matches=r"/orders/\d+$",
        page_contains="Order   CONFIRMED",
        answer_contains="order 42",
    )
    url = "https://shop.example/orders/42"
    page = "Thanks!\nYour order\nconfirmed."

    assert check.evaluate(url, page, "Done: ORDER 42 is placed.")
    assert not check.evaluate(url, page, None)
    assert not check.evaluate(url, page, "done")
    assert not check.evaluate("https://shop.example/cart", page, "order 42")
    assert not check.evaluate("https://shop.example/orders/42/x", page, "order 42")
    assert not check.evaluate(url, "Thanks!", "order 42")


def test_success_check_single_conditions() -> None:
    assert SuccessCheck(url_contains="b").evaluate("https://b.example/", "", None)
    assert not SuccessCheck(url_contains="B").evaluate("https://b.example/", "", None)
    assert SuccessCheck(answer_contains="Paris").evaluate("about:blank", "", "  paris ")


# --------------------------------------------------------------------------- adhoc


def test_adhoc_task() -> None:
    task = adhoc_task("https://example.com/", "  Find the contact page. ", 12)

    assert task == WebTask(
        id="adhoc", url="https://example.com/", goal="Find the contact page.", max_steps=12
    )
    assert task.success is None


@pytest.mark.parametrize(
    ("url", "goal", "max_steps", "expected"),
    [
        ("example.com", "g", 5, "--url: must be an http"),
        ("https://example.com/", "", 5, "--goal"),
        ("https://example.com/", "g", 0, "--max-steps"),
    ],
)
def test_adhoc_task_rejects_bad_flags(url: str, goal: str, max_steps: int, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        adhoc_task(url, goal, max_steps)
