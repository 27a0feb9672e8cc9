"""The navigation policy as a pure function: URL in, allowed or the reason why not."""

from __future__ import annotations

import pytest

from linewise.runtime.browser.navigation import (
    DomainPattern,
    NavigationPolicy,
    PatternError,
    host_address,
    is_metadata_host,
    is_private_host,
)
from linewise.settings import NavigationSettings

PUBLIC_START = "https://shop.example.org/"


def policy(start: str = PUBLIC_START, **settings: object) -> NavigationPolicy:
    return NavigationPolicy.for_task(
        NavigationSettings.model_validate(settings), start, devtools_port=9555
    )


@pytest.mark.parametrize("url", [
    "file:///etc/hostname", "file:///etc/", "chrome://version", "javascript:alert(1)",
    "JavaScript:alert(1)", "data:text/html,<p>hi</p>", "view-source:https://example.org/",
    "blob:https://example.org/0b6f", "about:config", "about:version", "chrome-extension://x/",
    "ftp://example.org/", "ws://example.org/", "nonsense",
])
def test_only_web_pages_are_allowed(url: str) -> None:
    reason = policy().refusal(url)
    assert reason is not None and "not allowed" in reason


@pytest.mark.parametrize("url", [
    "about:blank", "about:srcdoc", "https://example.org/a?b=c", "http://www.wikipedia.org/",
])
def test_web_pages_and_blank_are_allowed(url: str) -> None:
    assert policy().refusal(url) is None


@pytest.mark.parametrize("url", [
    "http://169.254.169.254/latest/meta-data/", "http://2852039166/", "http://0xa9fea9fe/",
    "http://[fd00:ec2::254]/", "http://metadata.google.internal/computeMetadata/v1/",
    "http://100.100.100.200/", "http://[::ffff:169.254.169.254]/", "http://169.254.170.2/v2",
])
def test_cloud_metadata_is_always_blocked(url: str) -> None:
    for p in (policy(), policy("http://127.0.0.1:8000/"), policy(allow_private=True),
              policy(allow_domains=("169.254.169.254", "metadata.google.internal"))):
        assert p.refusal(url) == "cloud metadata addresses are always blocked", url


def test_devtools_port_is_always_blocked() -> None:
    local = policy("http://127.0.0.1:8000/", allow_domains=("127.0.0.1",))
    for url in ("http://127.0.0.1:9555/json/list", "http://localhost:9555/json",
                "http://[::1]:9555/json/version"):
        assert local.refusal(url) == "the browser's DevTools port is always blocked"
    assert local.refusal("http://127.0.0.1:8000/page") is None


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:8080/", "http://localhost/", "http://app.localhost/", "http://10.0.0.5/",
    "http://192.168.1.1/admin", "http://172.16.3.4/", "http://[::1]:8000/", "http://0.0.0.0/",
    "http://2130706433/",
])
def test_private_addresses_need_the_allow_private_setting(url: str) -> None:
    assert "loopback or private" in (policy().refusal(url) or "")
    assert "loopback or private" in (policy("http://127.0.0.1:8000/t.html").refusal(url) or "")
    assert policy(allow_private=True).refusal(url) is None


def test_a_loopback_start_opens_only_its_own_host_and_port() -> None:
    p = policy("http://127.0.0.1:8701/task.html")
    for kind in ("document", "frame", "popup", "redirect", "subresource"):
        assert p.decide(kind, "http://127.0.0.1:8701/api") is None
        assert "other than the task's own" in (p.decide(kind, "http://127.0.0.1:8702/") or "")
        assert p.decide(kind, "http://localhost:8701/") is not None
    assert p.decide("websocket", "ws://127.0.0.1:8701/live") is None
    assert p.decide("websocket", "ws://127.0.0.1:8702/live") is not None
    assert p.decide("connection", "127.0.0.1:8701") is None
    assert p.decide("connection", "127.0.0.1:8702") is not None
    widened = policy("http://127.0.0.1:8701/", allow_private=True)
    assert widened.decide("subresource", "http://127.0.0.1:8702/") is None
    listed = policy("http://127.0.0.1:8701/", allow_domains=("127.0.0.1:8702",))
    assert listed.decide("websocket", "wss://127.0.0.1:8702/") is None
    assert listed.decide("subresource", "http://127.0.0.1:8703/") is not None


def test_sub_resources_websockets_and_connections_keep_only_the_address_rules() -> None:
    p = policy(allow_domains=("example.org",))
    assert p.decide("document", "https://cdn.test/lib.js") == "cdn.test is not on the allowlist"
    for kind, url in (("subresource", "https://cdn.test/lib.js"),
                      ("websocket", "wss://cdn.test/socket"), ("connection", "cdn.test:443")):
        assert p.decide(kind, url) is None
    assert "DevTools" in (p.decide("connection", "127.0.0.1:9555") or "")
    assert "metadata" in (p.decide("websocket", "ws://169.254.169.254/") or "")
    assert "loopback" in (p.decide("connection", "[::1]:80") or "")


def test_an_allowlist_pattern_may_open_one_private_host() -> None:
    p = policy(allow_domains=("example.org", "192.168.1.1"))
    assert p.refusal("http://192.168.1.1/") is None
    assert p.refusal("http://192.168.1.2/") is not None


def test_allowlist_blocks_everything_else_but_the_start() -> None:
    p = policy("https://start.test/", allow_domains=("example.org", "*.wiki.org"))
    assert p.refusal("https://example.org/") is None
    assert p.refusal("https://docs.example.org/x") is None
    assert p.refusal("https://en.wiki.org/") is None
    assert p.refusal("https://wiki.org/") == "wiki.org is not on the allowlist"
    assert p.refusal("https://example.org.evil.com/") is not None
    assert p.refusal("https://notexample.org/") is not None
    assert p.refusal("https://start.test/next") is None  # the task's own start


def test_allowlist_with_a_port_and_the_task_lists_add_up() -> None:
    p = NavigationPolicy.for_task(
        NavigationSettings(block_domains=("ads.example.org",)), "http://127.0.0.1:8000/",
        allowed_domains=("127.0.0.1:8000", "example.org"), blocked_domains=("evil.org",),
    )
    assert p.refusal("http://127.0.0.1:8000/x") is None
    assert "other than the task's own" in (p.refusal("http://127.0.0.1:8001/x") or "")
    assert "other than the task's own" in (p.refusal("http://localhost:8000/") or "")
    assert p.refusal("https://ads.example.org/") == "ads.example.org is on the blocklist"
    assert p.refusal("https://evil.org/") == "evil.org is on the blocklist"


def test_file_start_may_stay_inside_its_folder() -> None:
    p = policy("file:///home/me/pages/start.html")
    assert p.refusal("file:///home/me/pages/next.html") is None
    assert p.refusal("file:///home/me/pages/sub/a.html") is None
    assert "inside the task's folder" in (p.refusal("file:///etc/hostname") or "")
    assert p.refusal("file:///home/me/pages/../secret.txt") is not None
    assert p.refusal("file:///home/me/pagesX/a.html") is not None


def test_subresources_see_only_the_address_rules() -> None:
    p = policy(allow_domains=("example.org",))
    assert p.subresource_refusal("https://cdn.other.net/app.js") is None
    assert p.subresource_refusal("http://169.254.169.254/x.png") is not None
    assert p.subresource_refusal("http://192.168.0.1/x.png") is not None
    assert p.subresource_refusal("http://127.0.0.1:9555/json") is not None


def test_policy_off_allows_everything() -> None:
    assert policy(enforce=False).refusal("file:///etc/hostname") is None
    assert policy(enforce=False).subresource_refusal("http://169.254.169.254/") is None


def test_patterns() -> None:
    assert DomainPattern.parse("Example.ORG.") == DomainPattern("example.org")
    assert DomainPattern.parse("*.example.org") == DomainPattern("example.org", True)
    assert DomainPattern.parse("localhost:3000") == DomainPattern("localhost", False, 3000)
    assert DomainPattern.parse("[::1]:8080") == DomainPattern("::1", False, 8080)
    for bad in ("https://example.org", "example.org/path", "exa mple.org", "a:b", ""):
        with pytest.raises(PatternError):
            DomainPattern.parse(bad)


def test_address_helpers() -> None:
    assert str(host_address("0x7f000001")) == "127.0.0.1"
    assert host_address("cafe.be") is None
    assert is_metadata_host("169.254.169.254") and not is_metadata_host("example.org")
    assert is_private_host("LOCALHOST".lower()) and not is_private_host("8.8.8.8")


def test_flags_become_navigation_settings() -> None:
    from linewise.cli.flags import settings_from_args
    from linewise.cli.main import build_parser

    args = build_parser().parse_args([
        "run", "--url", "https://example.org", "--goal", "g", "--allow-domain", "example.org",
        "--allow-domain", "*.wiki.org", "--block-domain", "ads.example.org", "--downloads",
    ])
    navigation = settings_from_args(args, resolve=False).browser.navigation
    assert navigation.allow_domains == ("example.org", "*.wiki.org")
    assert navigation.block_domains == ("ads.example.org",)
    assert navigation.downloads and navigation.enforce and not navigation.allow_private
    default = settings_from_args(build_parser().parse_args(["run"]), resolve=False)
    assert default.browser.navigation == NavigationSettings()
    off = build_parser().parse_args(["run", "--no-navigation-policy"])
    assert not settings_from_args(off, resolve=False).browser.navigation.enforce
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--allow-domain", "https://example.org/x"])


def test_task_files_take_domain_lists(tmp_path: object) -> None:
    from pathlib import Path

    from linewise.errors import TaskFileError
    from linewise.runtime.tasks.loader import load_task_file

    assert isinstance(tmp_path, Path)
    good = tmp_path / "tasks.yaml"
    good.write_text("tasks:\n  - id: t\n    url: https://example.org\n    goal: g\n"
                    "    allowed_domains: [example.org, '*.cdn.org']\n"
                    "    blocked_domains: [ads.example.org]\n")
    [task] = load_task_file(good)
    assert task.allowed_domains == ("example.org", "*.cdn.org")  # type: ignore[union-attr]
    bad = tmp_path / "bad.yaml"
    bad.write_text("tasks:\n  - id: t\n    url: https://example.org\n    goal: g\n"
                   "    allowed_domains: ['https://example.org/']\n")
    with pytest.raises(TaskFileError, match="allowed_domains"):
        load_task_file(bad)
