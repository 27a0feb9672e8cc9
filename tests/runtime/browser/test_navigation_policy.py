"""The navigation policy as a pure function: URL in, allowed or the reason why not."""

from __future__ import annotations

import ipaddress

import pytest

from linewise.runtime.browser.addresses import (
    SPECIAL_RANGES,
    IPAddress,
    classify,
    host_address,
    is_loopback_host,
    is_metadata_host,
    is_private_host,
)
from linewise.runtime.browser.navigation import (
    DomainPattern,
    NavigationPolicy,
    PatternError,
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


UNROUTABLE = [
    "0.1.2.3", "192.0.0.1", "192.0.0.170", "192.0.2.1", "192.31.196.1", "192.52.193.1",
    "192.88.99.1", "192.175.48.1", "198.51.100.7", "203.0.113.9", "224.0.0.251",
    "239.255.255.250", "240.0.0.1", "255.255.255.255", "[2001::1]", "[2001:1::1]",
    "[2001:20::1]", "[2001:db8::1]", "[3fff::1]", "[100::1]", "[5f00::1]",
    "[2620:4f:8000::1]", "[4000::1]", "[ff02::1]", "[ff05::fb]", "[::ffff:203.0.113.1]",
    "[2002:c000:201::]", "[64:ff9b::192.0.2.1]", "[::2]",
]
PRIVATE = [
    "100.64.0.1", "100.100.100.100", "100.127.255.254", "198.18.0.1", "198.19.255.1",
    "[fec0::1]", "[fd12:3456::1]", "[64:ff9b:1::a00:1]", "[2001:2::1]", "[::]",
    "[2002:7f00:1::]", "[2002:a00:1::1]", "[64:ff9b::127.0.0.1]", "[64:ff9b::a00:1]",
    "[::ffff:10.0.0.1]", "[::127.0.0.1]", "[::ffff:7f00:1]",
]
PUBLIC = [
    "8.8.8.8", "100.128.0.1", "100.63.255.255", "198.20.0.1", "[2606:4700::1111]",
    "[64:ff9b::8.8.8.8]", "[2002:808:808::1]", "[2001:200::1]",
]


@pytest.mark.parametrize("host", UNROUTABLE)
def test_unroutable_special_purpose_addresses_are_always_blocked(host: str) -> None:
    """Documentation, reserved, broadcast, multicast, protocol anycast and IETF-reserved
    IPv6 space: no web server lives there, so no setting opens them."""
    for p in (policy(), policy(allow_private=True),
              policy(f"http://{host}:8000/", allow_domains=(host,))):
        for kind, url in (("document", f"http://{host}/"), ("subresource", f"http://{host}/x"),
                          ("websocket", f"ws://{host}/"), ("connection", f"{host}:443")):
            reason = p.decide(kind, url) or ""  # type: ignore[arg-type]
            assert "always blocked" in reason and "never a web server" in reason, (kind, url)


@pytest.mark.parametrize("host", PRIVATE)
def test_carrier_grade_nat_site_local_and_embedded_private_forms_are_private(host: str
                                                                           ) -> None:
    for kind, url in (("document", f"http://{host}/"), ("subresource", f"http://{host}/x"),
                      ("connection", f"{host}:80")):
        assert "loopback or private" in (policy().decide(kind, url) or ""), (kind, url)  # type: ignore[arg-type]
        assert policy(allow_private=True).decide(kind, url) is None  # type: ignore[arg-type]
    assert policy(allow_domains=(host,)).refusal(f"http://{host}/") is None


@pytest.mark.parametrize("url", [
    "http://[2002:a9fe:a9fe::]/", "http://[64:ff9b::169.254.169.254]/",
    "http://[::169.254.169.254]/", "http://[fe80::1%25eth0]/", "http://169.254.43518/",
])
def test_metadata_in_embedded_forms_is_metadata(url: str) -> None:
    assert policy(allow_private=True).refusal(url) == "cloud metadata addresses are always blocked"


@pytest.mark.parametrize("host", PUBLIC)
def test_public_addresses_next_to_the_special_ranges_stay_public(host: str) -> None:
    assert policy().refusal(f"http://{host}/") is None
    assert policy().decide("connection", f"{host}:443") is None


def test_the_devtools_port_is_blocked_in_every_loopback_form() -> None:
    p = policy(allow_private=True)
    for host in ("[::ffff:127.0.0.1]", "[2002:7f00:1::]", "0.0.0.0", "[::]", "2130706433"):
        assert p.refusal(f"http://{host}:9555/json") == (
            "the browser's DevTools port is always blocked"), host


def test_the_address_table_names_every_range_and_its_registry() -> None:
    for row in SPECIAL_RANGES:
        assert (row.name and "IANA" in row.registry) or row.kind == "metadata", row
    assert classify(host_address("100.100.100.200")).kind == "metadata"  # type: ignore[arg-type]
    found = classify(host_address("2002:7f00:1::"))  # type: ignore[arg-type]
    assert found.kind == "loopback" and str(found.carried) == "127.0.0.1"
    assert "Shared Address Space" in classify(host_address("100.64.0.1")).describe()  # type: ignore[arg-type]
    assert is_loopback_host("[::ffff:127.0.0.1]") and not is_loopback_host("0.0.0.0")


def _ips(*texts: str) -> list[IPAddress]:
    return [ipaddress.ip_address(t) for t in texts]


def test_a_name_is_judged_by_every_address_it_resolved_to() -> None:
    """A name that resolves to loopback is loopback, whoever names it: the start URL and
    an allowlist pattern open the name's pages, never its private addresses (DNS may
    point the name anywhere later); a pattern naming the address opens it."""
    loopback = _ips("127.0.0.1")
    for p in (policy(), policy("http://vm:8000/"), policy(allow_domains=("vm",))):
        reason = p.connection_refusal("vm", 8000, loopback) or ""
        assert reason.startswith("vm resolves to 127.0.0.1: ") and "loopback" in reason
    assert policy(allow_domains=("127.0.0.1:8000",)).connection_refusal(
        "vm", 8000, loopback) is None
    assert policy("http://127.0.0.1:8000/").connection_refusal("vm", 8000, loopback) is None
    assert policy("http://127.0.0.1:8000/").connection_refusal("vm", 8001, loopback)
    assert policy(allow_private=True).connection_refusal("vm", 8000, loopback) is None
    assert "DevTools" in (policy(allow_private=True).connection_refusal(
        "vm", 9555, loopback) or "")
    # one refused address refuses the name: the proxy would fall back to it
    assert policy().connection_refusal("mixed.test", 80, _ips("8.8.8.8", "10.0.0.1"))
    assert policy().connection_refusal("cdn.test", 443, _ips("8.8.8.8", "2606:4700::1")) is None
    assert "metadata" in (policy(allow_private=True).connection_refusal(
        "imds.test", 80, _ips("169.254.169.254")) or "")
    assert "never a web server" in (policy(allow_private=True).connection_refusal(
        "doc.test", 80, _ips("2001:db8::1")) or "")
    assert "blocklist" in (policy(block_domains=("10.0.0.5",)).connection_refusal(
        "intranet.test", 80, _ips("10.0.0.5")) or "")


def test_localhost_and_mapped_names_are_judged_by_the_name() -> None:
    """``localhost`` is loopback by name (a loopback start on it opens its port); a name an
    operator's resolver rule maps is the named site, its address refused only when it is
    metadata or unroutable."""
    start = policy("http://localhost:8701/")
    both = _ips("127.0.0.1", "::1")
    assert start.connection_refusal("localhost", 8701, both, by_name=True) is None
    assert start.connection_refusal("localhost", 8702, both, by_name=True)
    assert policy().connection_refusal("public.test", 80, _ips("127.0.0.2"),
                                       by_name=True) is None
    assert "metadata" in (policy().connection_refusal(
        "public.test", 80, _ips("169.254.169.254"), by_name=True) or "")


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
