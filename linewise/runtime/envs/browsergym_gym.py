"""BrowserGym's sync gym environment, made to run here and from many threads.

BrowserGym's ``BrowserEnv`` is sync Playwright, and out of the box it cannot run next to
an asyncio loop or on this machine:

- it shares one global sync Playwright, created by whichever thread came first; sync
  Playwright is bound to the thread (greenlet) that started it, so a second thread
  fails. ``thread_playwright`` gives every thread its own instance.
- it launches Chromium without ``executable_path`` (and its chat window launches a
  second Chromium that nothing can configure): every launch here gets Debian's Chromium
  and the flags an offline sandbox needs. ``MemoryChat`` replaces the chat window with
  the in-memory message list the tasks actually read, so an episode starts one
  Chromium, not two.
- its high-level actions hard-code ``timeout=500`` ms: ``action_mapping`` rewrites the
  generated code to use the configured action timeout.
- it runs its own copy of each action (``HighLevelActionSet``), which linewise's parser,
  prompt and grammar know nothing of: ``check_actions`` makes sure, before a task
  starts, that it has every action the task offers, taking the arguments linewise's
  does.
- tasks set ``slow_mo`` (MiniWoB++: 100 ms per Playwright call): ``make_env`` passes 0
  unless asked otherwise.

``benchmarks/step_overhead.py``, ``benchmarks/bench_throughput.py`` and the bench's
BrowserGym backend all build their environments here.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

from linewise.agent.actions import ActionSet, render_signature
from linewise.errors import ConfigError
from linewise.runtime.browser import call_stacks
from linewise.runtime.browser.chromium import CHROMIUM_ARGS, GYM_BID_ATTRIBUTE, find_chromium
from linewise.runtime.browser.driver import LAUNCH_SIGNALS, driver_environ

_local = threading.local()

FAMILY_MODULES = {
    "miniwob": "browsergym.miniwob",
    "webarena": "browsergym.webarena",
    "visualwebarena": "browsergym.visualwebarena",
    "workarena": "browsergym.workarena",
    "assistantbench": "browsergym.assistantbench",
    "weblinx": "browsergym.weblinx",
    "openended": "browsergym.core",
}
FAMILY_PACKAGES = {
    family: module.replace(".", "-") for family, module in FAMILY_MODULES.items()
}
REQUIRED_ENVIRONMENT = {
    "webarena": ("WA_SHOPPING", "WA_SHOPPING_ADMIN", "WA_REDDIT", "WA_GITLAB",
                 "WA_WIKIPEDIA", "WA_MAP", "WA_HOMEPAGE"),
    "visualwebarena": ("VWA_CLASSIFIEDS", "VWA_CLASSIFIEDS_RESET_TOKEN", "VWA_SHOPPING",
                       "VWA_REDDIT", "VWA_WIKIPEDIA", "VWA_HOMEPAGE"),
    "workarena": ("SNOW_INSTANCE_URL", "SNOW_INSTANCE_UNAME", "SNOW_INSTANCE_PWD"),
}
"""The servers a family's tasks need, as BrowserGym's packages read them."""


def thread_playwright() -> Any:
    """This thread's sync Playwright, started on first use, launching Debian's Chromium."""
    playwright = getattr(_local, "playwright", None)
    if playwright is None:
        from playwright.sync_api import sync_playwright

        # The driver, and so its Chromium, holds no secret, and it leaves Ctrl+C and
        # SIGTERM to linewise, as the runtime's own Browser's does (browser/driver.py).
        with driver_environ():
            playwright = sync_playwright().start()
        call_stacks.install()
        original = playwright.chromium.launch

        def launch(**kwargs: Any) -> Any:
            executable = find_chromium(headless=kwargs.get("headless", True))
            if executable is not None:
                kwargs.setdefault("executable_path", executable)
            kwargs["args"] = [*kwargs.get("args", []), *CHROMIUM_ARGS]
            kwargs.update(LAUNCH_SIGNALS)
            return original(**kwargs)

        playwright.chromium.launch = launch  # type: ignore[method-assign]
        _local.playwright = playwright
    return playwright


def stop_thread_playwright() -> None:
    """Stop this thread's Playwright (its driver process) if it has one."""
    playwright = getattr(_local, "playwright", None)
    if playwright is not None:
        _local.playwright = None
        playwright.stop()


class MemoryChat:
    """BrowserGym's chat, without its Chromium window: tasks only read ``messages``."""

    ROLES = ("user", "user_image", "assistant", "info", "infeasible")

    def __init__(self, headless: bool = True, chat_size: Any = None,
                 record_video_dir: Any = None, modern: bool = True) -> None:
        self.messages: list[dict[str, Any]] = []
        self.page = None
        self.recording_start_time = None

    def add_message(self, role: str, msg: str) -> None:
        if role not in self.ROLES:
            raise ValueError(f"Invalid role: {role}")
        self.messages.append({"role": role, "timestamp": time.time(), "message": msg})

    def wait_for_user_message(self) -> None:
        raise RuntimeError("no chat window: this environment has no user to wait for")

    def close(self) -> None:
        pass


_ORIGINAL_CHAT: Any = None


def install(*, memory_chat: bool = True) -> None:
    """Route BrowserGym's Playwright through ``thread_playwright``; choose its chat."""
    global _ORIGINAL_CHAT
    import browsergym.core.chat as chat_module
    import browsergym.core.env as env_module
    import browsergym.core.observation as observation_module
    import browsergym.utils.obs as obs_utils

    env_module._get_global_playwright = thread_playwright
    chat_module._get_global_playwright = thread_playwright
    # BrowserGym marks elements under the attribute ``bid``, which pages use themselves
    # (its marking then refuses the page) and can forge: a private name instead, read
    # where BrowserGym reads its constant (the test-id attribute its actions locate by,
    # the snapshot and focus readers).
    env_module.BROWSERGYM_ID_ATTRIBUTE = GYM_BID_ATTRIBUTE
    observation_module.BID_ATTR = GYM_BID_ATTRIBUTE
    obs_utils.BID_ATTR = GYM_BID_ATTRIBUTE
    if _ORIGINAL_CHAT is None:
        _ORIGINAL_CHAT = env_module.Chat
    env_module.Chat = MemoryChat if memory_chat else _ORIGINAL_CHAT


def action_mapping(timeout_ms: int, browsergym_actions: Any = None) -> Callable[[str], str]:
    """BrowserGym's action set (``browsergym_actions``, a ``HighLevelActionSet``; its
    default one if None), with its 500 ms element timeout replaced."""
    if browsergym_actions is None:
        from browsergym.core.action.highlevel import HighLevelActionSet

        browsergym_actions = HighLevelActionSet()
    to_code = browsergym_actions.to_python_code

    def mapping(action: str) -> str:
        code: str = to_code(action)
        return code.replace("timeout=500", f"timeout={timeout_ms}")

    return mapping


def check_actions(actions: ActionSet, browsergym_actions: Any) -> None:
    """Fail unless BrowserGym runs each of ``actions`` as linewise offers it.

    The model's call is checked against linewise's signature (``action_parser``), then
    written out (``ParsedAction.__str__``: positionally while no argument is skipped,
    then by keyword) and run by BrowserGym's own function of that name, from
    ``browsergym_actions`` (the ``HighLevelActionSet`` the env maps actions with). So
    BrowserGym must have an action of each name, whose parameters begin with linewise's,
    by name and in order; any it has beyond them must be optional, and so must any that
    linewise lets the model leave out. Types and defaults are not compared: the parser
    has validated the values, and a default the two spell differently (``modifiers``:
    None here, ``[]`` there) means the same.

    Raises:
        ConfigError: naming the first action that disagrees, and how.
    """
    for name, spec in actions.items():
        theirs = browsergym_actions.action_set.get(name)
        if theirs is None:
            raise ConfigError(
                f"BrowserGym's action set has no action {name!r}, which linewise offers "
                f"this task: BrowserGym cannot run {render_signature(spec.function)}")
        problem = _disagreement(spec.parameters, _browsergym_parameters(theirs.signature))
        if problem is not None:
            raise ConfigError(
                f"linewise's action {name!r} disagrees with BrowserGym's: {problem} "
                f"(linewise: {render_signature(spec.function)}; BrowserGym: "
                f"{theirs.signature})")


def _browsergym_parameters(signature: str) -> list[tuple[str, bool]]:
    """Each parameter of a BrowserGym action signature (``click(bid: str, …)``, as
    ``HighLevelActionSet`` keeps it), with whether it is optional, in order."""
    try:
        function = ast.parse(f"def {signature}: pass").body[0]
    except SyntaxError as exc:
        raise ConfigError(f"BrowserGym's action signature {signature!r} cannot be read "
                          f"({exc.msg})") from exc
    assert isinstance(function, ast.FunctionDef)
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    first_optional = len(positional) - len(args.defaults)
    return ([(arg.arg, index >= first_optional) for index, arg in enumerate(positional)]
            + [(arg.arg, default is not None)
               for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True)])


def _disagreement(ours: list[inspect.Parameter], theirs: list[tuple[str, bool]]
                  ) -> str | None:
    """How BrowserGym's parameters (``theirs``) cannot take a call of linewise's
    (``ours``), or None where every call of linewise's runs there as written."""
    for index, param in enumerate(ours):
        if index >= len(theirs):
            return f"BrowserGym's takes no parameter {param.name!r}"
        name, optional = theirs[index]
        if name != param.name:
            return f"parameter {index + 1} is {param.name!r} here, {name!r} in BrowserGym's"
        if param.default is not inspect.Parameter.empty and not optional:
            return f"{param.name!r} may be left out here, not in BrowserGym's"
    required = [name for name, optional in theirs[len(ours):] if not optional]
    if required:
        return f"BrowserGym's also requires {', '.join(map(repr, required))}"
    return None


def check_family(family: str) -> None:
    """Fail clearly when a family's package or servers are missing."""
    module = FAMILY_MODULES.get(family)
    if module is None:
        raise ConfigError(f"unknown BrowserGym benchmark {family!r}")
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(
            f"browsergym/{family}.* tasks need {FAMILY_PACKAGES[family]}: "
            f"pip install {FAMILY_PACKAGES[family]} ({exc})"
        ) from exc
    missing = [name for name in REQUIRED_ENVIRONMENT.get(family, ()) if not os.environ.get(name)]
    if missing:
        raise ConfigError(
            f"browsergym/{family}.* tasks need their servers: set {', '.join(missing)} "
            "(see docs/tasks-and-benchmarks.md, \"BrowserGym tasks\")"
        )


def make_env(
    env_id: str,
    *,
    task_kwargs: dict[str, Any] | None = None,
    headless: bool = True,
    slow_mo_ms: int | None = 0,
    timeout_ms: int | None = None,
    action_timeout_ms: int | None = 5000,
    chat: Literal["memory", "browsergym"] = "memory",
    context_options: dict[str, Any] | None = None,
    actions: ActionSet | None = None,
) -> Any:
    """A BrowserGym env for this thread. ``slow_mo_ms=None`` keeps the task's slow_mo,
    ``action_timeout_ms=None`` BrowserGym's 500 ms and ``chat="browsergym"`` its chat
    window (for a baseline of BrowserGym as it ships); ``context_options`` go to
    Playwright's ``new_context``. ``actions``: the actions the env will be asked to run,
    checked first against BrowserGym's own (``check_actions``).

    Raises:
        ConfigError: the family's package or servers are missing, or BrowserGym would
            not run one of ``actions`` as linewise offers it.
    """
    import gymnasium as gym
    from browsergym.core.action.highlevel import HighLevelActionSet

    family = env_id.removeprefix("browsergym/").split(".", 1)[0]
    check_family(family)
    browsergym_actions = HighLevelActionSet()  # BrowserEnv's default set, checked
    if actions is not None:
        check_actions(actions, browsergym_actions)
    install(memory_chat=chat == "memory")
    kwargs: dict[str, Any] = {
        "task_kwargs": task_kwargs or {},
        "headless": headless,
        "slow_mo": slow_mo_ms,
        "timeout": timeout_ms,  # None: the task's own
        "wait_for_user_message": False,
        "pw_context_kwargs": context_options or {},
    }
    kwargs["action_mapping"] = (browsergym_actions.to_python_code if action_timeout_ms is None
                                else action_mapping(action_timeout_ms, browsergym_actions))
    return gym.make(env_id, **kwargs)
