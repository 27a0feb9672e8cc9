"""The navigation policy: which URLs a page of an episode may load, and why not.

A pure function of the URL and the policy's settings, used twice with the same object:
by the ``goto`` action before the model's navigation starts, and by the network guard
(``runtime/browser/guard.py``) for every document, frame and redirect hop the browser
requests, whoever started it.

Rules, in order:

1. Only ``http:`` and ``https:`` pages. ``about:blank`` and ``about:srcdoc`` (an empty
   page, an iframe's inline document) are allowed; ``file:`` only inside the folder of a
   task whose own start URL is a ``file:`` URL; every other scheme (``chrome:``,
   ``javascript:``, ``data:``, ``view-source:``, ``blob:``, ``about:config``…) is refused.
2. Cloud metadata addresses (link-local 169.254.0.0/16 and fe80::/10, fd00:ec2::254,
   100.100.100.200, metadata.google.internal…), unroutable ones (documentation,
   reserved, broadcast, multicast, protocol anycast) and the browser's own DevTools port
   are always refused.
3. ``block_domains`` patterns are refused.
4. Loopback and private addresses (127.0.0.0/8, ::1, 10/8, 172.16/12, 192.168/16,
   100.64.0.0/10, fc00::/7, fec0::/10, 0.0.0.0, ``localhost``…) are refused unless
   ``allow_private`` is set or an allowlist pattern names the host. A start URL on one
   opens only its own host and port (``127.0.0.1:8701`` does not open
   ``127.0.0.1:8702``).

What an address is comes from one table, ``addresses.py`` (IANA's special-purpose
registries; embedded IPv4 forms are the address they carry). A URL's host is judged as
written: a name other than ``localhost`` is not an address here, and the policy proxy
judges the addresses it resolves to (``connection_refusal`` with ``resolved``) by the
same rules as if they were written literally.
5. With an allowlist (``allow_domains``), hosts outside it are refused; the start URL's
   own host is always on it.

Which rules apply depends on the kind of request (``RequestKind``, ``decide``): documents,
frames, popups and redirect hops of documents get all five; a page's sub-resources,
their redirect hops and its WebSockets only the address rules 2–4 (a page may load
scripts and images from public CDNs off the allowlist, never from what 2–4 forbid).

Domain patterns: ``example.org`` matches example.org and every subdomain;
``*.example.org`` only the subdomains; an IP address matches itself; a pattern with a
port (``127.0.0.1:8000``, ``localhost:3000``) matches only that port.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal
from urllib.parse import unquote, urljoin, urlsplit

from linewise.runtime.browser.addresses import IPAddress, classify, classify_host, host_address
from linewise.settings import NavigationSettings

WEB_SCHEMES = ("http", "https")
ALLOWED_ABOUT = ("about:blank", "about:srcdoc")

RequestKind = Literal["document", "frame", "popup", "redirect", "subresource", "websocket",
                      "connection"]
"""What asks for a URL: a top-level page, an iframe, a new tab, a hop of a document's
redirect chain, a page's image/script/fetch (or a hop of its redirect chain), a
WebSocket, or a raw connection to a host and port (the proxy sees no more than that)."""
DOCUMENT_KINDS: frozenset[RequestKind] = frozenset({"document", "frame", "popup", "redirect"})

_PATTERN = re.compile(r"(\*\.)?[a-z0-9_.\-]+|\[[0-9a-f:.]+\]")


class PatternError(ValueError):
    """A domain pattern that is not ``host``, ``*.host`` or ``host:port``."""


@dataclass(frozen=True)
class DomainPattern:
    """One ``--allow-domain``/``--block-domain`` pattern, parsed."""

    host: str
    subdomains_only: bool = False
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> DomainPattern:
        raw = text.strip().lower().rstrip(".")
        if "://" in raw or "/" in raw:
            raise PatternError(f"{text!r}: give a host name (example.org), not a URL")
        host, port = raw, None
        if raw.startswith("["):  # [::1]:8080
            host, _, rest = raw.partition("]")
            host += "]"
            if rest.startswith(":"):
                port = _port(text, rest[1:])
        elif raw.count(":") == 1:
            host, port_text = raw.split(":")
            port = _port(text, port_text)
        if not _PATTERN.fullmatch(host):
            raise PatternError(
                f"{text!r}: expected example.org, *.example.org, an IP address or host:port"
            )
        subdomains_only = host.startswith("*.")
        return cls(canonical_host(host.removeprefix("*.").strip("[]")), subdomains_only,
                   port)

    def matches(self, host: str, port: int | None) -> bool:
        if self.port is not None and self.port != port:
            return False
        if host == self.host:
            return not self.subdomains_only
        return host.endswith("." + self.host)


def _port(text: str, port: str) -> int:
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise PatternError(f"{text!r}: bad port {port!r}")
    return int(port)


def canonical_host(host: str) -> str:
    """A host lower-cased without brackets or a final dot; a literal address in its one
    canonical spelling (``2130706433`` and ``0x7f.1`` are ``127.0.0.1``)."""
    host = host.strip("[]").lower().rstrip(".")
    address = host_address(host)
    return host if address is None else address.compressed


def parse_patterns(patterns: tuple[str, ...] | list[str]) -> tuple[DomainPattern, ...]:
    return tuple(DomainPattern.parse(p) for p in patterns)


@dataclass(frozen=True)
class ParsedURL:
    scheme: str
    host: str
    port: int | None
    path: str


def parse_url(url: str) -> ParsedURL | None:
    """Scheme, lower-cased host, effective port and path; None when it cannot be parsed."""
    try:
        parts = urlsplit(url.strip())
        scheme = parts.scheme.lower()
        host = canonical_host(parts.hostname or "")
        port = parts.port
    except ValueError:
        return None
    if port is None and scheme in WEB_SCHEMES:
        port = 443 if scheme == "https" else 80
    return ParsedURL(scheme, host, port, unquote(parts.path))


@dataclass(frozen=True)
class NavigationPolicy:
    """Whether a URL may be loaded as a page or frame of the episode (``refusal``)."""

    allow: tuple[DomainPattern, ...] = ()
    block: tuple[DomainPattern, ...] = ()
    allow_private: bool = False
    file_root: PurePosixPath | None = None
    """The folder a ``file:`` start URL may stay inside."""
    start_host: tuple[str, int | None] | None = None
    devtools_port: int | None = None
    enforce: bool = True
    downloads: bool = False

    @classmethod
    def for_task(
        cls,
        settings: NavigationSettings,
        start_url: str,
        *,
        allowed_domains: tuple[str, ...] = (),
        blocked_domains: tuple[str, ...] = (),
        devtools_port: int | None = None,
    ) -> NavigationPolicy:
        """The policy of one episode: the run's settings, the task's own lists (added to
        the run's), and what the start URL implies (private addresses, a file folder)."""
        start = parse_url(start_url)
        file_root = None
        start_host = None
        if start is not None and start.scheme == "file":
            file_root = PurePosixPath(start.path).parent
        elif start is not None and start.host:
            start_host = (start.host, start.port)
        return cls(
            allow=parse_patterns((*settings.allow_domains, *allowed_domains)),
            block=parse_patterns((*settings.block_domains, *blocked_domains)),
            allow_private=settings.allow_private,
            file_root=file_root,
            start_host=start_host,
            devtools_port=devtools_port,
            enforce=settings.enforce,
            downloads=settings.downloads,
        )

    def decide(self, kind: RequestKind, url: str) -> str | None:
        """None if a request of ``kind`` may fetch ``url``, else why not: the one entry
        point of both guards and the proxy (``connection`` takes ``host:port``)."""
        if kind in DOCUMENT_KINDS:
            return self.refusal(url)
        if kind == "connection":
            host, _, port = url.rpartition(":")
            return self.connection_refusal(host, int(port) if port.isdigit() else None)
        return self.subresource_refusal(url)

    def connection_refusal(self, host: str, port: int | None,
                           resolved: Sequence[IPAddress] = (), *, by_name: bool = False
                           ) -> str | None:
        """For a raw connection (the proxy's): the address rules, as for sub-resources.

        ``resolved``: the addresses the proxy resolved ``host`` to, and will connect to;
        each must pass the same rules as if it were written literally (a name that
        resolves to 127.0.0.1 is 127.0.0.1 to the policy, whoever names it: an allowlist
        pattern or start URL naming the name does not open its private address, since
        DNS may point it anywhere later). ``by_name``: a ``localhost`` name or one an
        operator's resolver rule maps (``resolver.py``), judged by the name as written;
        its addresses still by the always-refused rules."""
        if not self.enforce:
            return None
        host = canonical_host(host)
        reason = self._host_refusal(host, port, document=False)
        if reason is not None:
            return reason
        for address in resolved:
            literal = address.compressed
            if literal == host or (by_name and not classify(address).blocked_always):
                continue
            reason = self._host_refusal(literal, port, document=False)
            if reason is not None:
                return f"{host} resolves to {literal}: {reason}"
        return None

    def refusal(self, url: str) -> str | None:
        """None if ``url`` may be loaded, else the reason it may not (a short phrase)."""
        if not self.enforce:
            return None
        if url.strip().lower() in ALLOWED_ABOUT:
            return None
        parsed = parse_url(url)
        if parsed is None:
            return "the URL cannot be parsed"
        if parsed.scheme == "file":
            return self._file_refusal(parsed)
        if parsed.scheme not in WEB_SCHEMES:
            scheme = parsed.scheme or url.split(":", 1)[0]
            return f"{scheme}: URLs are not allowed (only http and https pages)"
        if not parsed.host:
            return "the URL has no host"
        return self._host_refusal(parsed.host, parsed.port, document=True)

    def subresource_refusal(self, url: str) -> str | None:
        """For images, scripts, fetches and WebSockets: only the address rules (metadata,
        DevTools, private networks); which public domains a page may load resources from
        is its business."""
        if not self.enforce:
            return None
        parsed = parse_url(url)
        if parsed is not None and parsed.scheme in ("ws", "wss"):
            parsed = parse_url("http" + url.strip()[2:])
        if parsed is None or parsed.scheme not in WEB_SCHEMES or not parsed.host:
            return None
        return self._host_refusal(parsed.host, parsed.port, document=False)

    def _file_refusal(self, parsed: ParsedURL) -> str | None:
        if self.file_root is None:
            return "file: URLs are not allowed (only http and https pages)"
        path = PurePosixPath(parsed.path)
        if ".." in path.parts or not path.is_relative_to(self.file_root):
            return f"file: URLs are allowed only inside the task's folder {self.file_root}"
        return None

    def _host_refusal(self, host: str, port: int | None, *, document: bool) -> str | None:
        found = classify_host(host)
        if found is not None and found.kind == "metadata":
            return "cloud metadata addresses are always blocked"
        if found is not None and found.kind == "unroutable":
            return (f"{host} is in {found.describe()}, never a web server's address: "
                    "always blocked")
        private = found is not None and found.private
        if self.devtools_port is not None and port == self.devtools_port and private:
            return "the browser's DevTools port is always blocked"
        if any(p.matches(host, port) for p in self.block):
            return f"{host} is on the blocklist"
        is_start = self.start_host == (host, port)
        listed = any(p.matches(host, port) for p in self.allow)
        if private and not (self.allow_private or listed or is_start):
            return (f"{host}:{port} is a loopback or private address other than the task's "
                    "own host and port")
        if document and self.allow and not (listed or is_start):
            return f"{host} is not on the allowlist"
        return None


MAX_REDIRECTS = 20
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


@dataclass(frozen=True)
class ChainEnd:
    """Where a redirect chain ended: ``url`` is the last allowed hop (load it, with a
    307 when ``keeps_method`` else a 303), or the refused target when ``refusal`` is set
    (``previous`` redirected there); ``exhausted`` when it never ended."""

    url: str
    hops: int
    keeps_method: bool = True
    refusal: str | None = None
    previous: str = ""
    exhausted: bool = False


def redirect_chain(
    policy: NavigationPolicy, url: str, status: int, headers: Mapping[str, str]
) -> Generator[tuple[str, bool], tuple[int, Mapping[str, str]], ChainEnd]:
    """Check a document's redirect chain hop by hop, whatever does the fetching.

    Start it with the first response's status and headers; it yields ``(url,
    keeps_method)`` for each allowed hop to fetch (without following redirects) and is
    sent that hop's status and headers back. Nothing past a refused hop is fetched. The
    async guard and BrowserGym's sync one both drive it.
    """
    keeps_method = True
    for hops in range(MAX_REDIRECTS + 1):
        if status not in REDIRECT_STATUSES or "location" not in headers:
            return ChainEnd(url, hops, keeps_method)
        target = urljoin(url, headers["location"])
        reason = policy.decide("redirect", target)
        if reason is not None:
            return ChainEnd(target, hops, keeps_method, reason, previous=url)
        keeps_method = keeps_method and status in (307, 308)
        url = target
        status, headers = yield url, keeps_method
    return ChainEnd(url, MAX_REDIRECTS, keeps_method, exhausted=True)
