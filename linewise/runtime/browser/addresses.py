"""What kind of address a host is: IANA's special-purpose registries as one table.

Every guard that asks "is this host private, loopback, metadata?" asks here: the
navigation policy (``navigation.py``) for a URL's host as written, the policy proxy
(``proxy.py``, through ``resolver.py``) for the addresses a name resolves to, and the
viewer for the address it serves on. One table, so a range is never public to one guard
and private to another.

Kinds, and what the policy does with them:

- ``loopback``: this machine (127.0.0.0/8, ::1). Refused unless allowed, like private.
- ``private``: reachable on a network this machine is on, not on the internet: private
  use (10/8, 172.16/12, 192.168/16, fc00::/7), carrier-grade NAT (100.64.0.0/10, where
  Tailscale's 100.100.100.100 lives), IPv6 site-local, benchmarking networks, NAT64 for
  local use, and 0.0.0.0 and :: (a connection to them reaches this machine on Linux).
  Refused unless ``allow_private``, an allowlist pattern or the task's start names them.
- ``metadata``: cloud metadata services (link-local 169.254.0.0/16 and fe80::/10, where
  AWS, GCP, Azure and the rest answer; Alibaba's 100.100.100.200; AWS's fd00:ec2::254).
  Always refused.
- ``unroutable``: never a web server's address: unassigned or reserved space,
  documentation ranges, broadcast, multicast, or a protocol's own anycast service (AS112,
  AMT, PCP, TURN). Always refused.
- ``public``: everything else.

Embedded-IPv4 forms (IPv4-mapped ``::ffff:a.b.c.d``, IPv4-compatible ``::a.b.c.d``,
NAT64 ``64:ff9b::a.b.c.d``, 6to4 ``2002:AABB:CCDD::``) are the IPv4 address they carry:
``[::ffff:127.0.0.1]`` and ``[2002:7f00:1::]`` are loopback, ``[64:ff9b::8.8.8.8]`` is
public. Teredo (2001::/32) is refused with the rest of 2001::/23: its client address is a
NAT's state, which nothing here can vouch for.

Why a table and not ``ipaddress``'s ``is_private``/``is_global``: their answers change
between Python versions (3.11 calls ``::ffff:127.0.0.1`` neither loopback nor private;
100.64.0.0/10 is neither private nor global), they know nothing of metadata or embedded
forms, and each row here says which registry entry it is and why it is refused. The
most specific row wins (100.100.100.200 is metadata inside carrier-grade NAT).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from typing import Literal

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

Kind = Literal["public", "loopback", "private", "metadata", "unroutable"]
RowKind = Literal["loopback", "private", "metadata", "unroutable", "embedded"]

IPV4_REGISTRY = "IANA IPv4 Special-Purpose Address Registry"
IPV6_REGISTRY = "IANA IPv6 Special-Purpose Address Registry"
IPV4_MULTICAST = "IANA IPv4 Multicast Address Space Registry"
IPV6_SPACE = "IANA Internet Protocol Version 6 Address Space"
CLOUD = "cloud provider documentation"


@dataclass(frozen=True)
class SpecialRange:
    """One row: a network, its name in its registry, and what it is to the policy.
    ``embedded_shift`` (``embedded`` rows): how far right the carried IPv4 address sits."""

    network: IPNetwork
    name: str
    registry: str
    kind: RowKind
    embedded_shift: int = 0


def _row(network: str, name: str, registry: str, kind: RowKind, shift: int = 0
         ) -> SpecialRange:
    return SpecialRange(ipaddress.ip_network(network), name, registry, kind, shift)


SPECIAL_RANGES: tuple[SpecialRange, ...] = (
    # IPv4 special-purpose registry (RFC 6890 and its updates)
    _row("0.0.0.0/8", '"This network"', IPV4_REGISTRY, "unroutable"),
    _row("0.0.0.0/32", '"This host on this network"', IPV4_REGISTRY, "private"),
    _row("10.0.0.0/8", "Private-Use", IPV4_REGISTRY, "private"),
    _row("100.64.0.0/10", "Shared Address Space (carrier-grade NAT)", IPV4_REGISTRY,
         "private"),
    _row("127.0.0.0/8", "Loopback", IPV4_REGISTRY, "loopback"),
    _row("169.254.0.0/16", "Link Local (cloud metadata)", IPV4_REGISTRY, "metadata"),
    _row("172.16.0.0/12", "Private-Use", IPV4_REGISTRY, "private"),
    # 192.0.0.0/24's own entries (service continuity, dummy, PCP and TURN anycast,
    # NAT64/DNS64 discovery) are all protocol addresses: refused with it.
    _row("192.0.0.0/24", "IETF Protocol Assignments", IPV4_REGISTRY, "unroutable"),
    _row("192.0.2.0/24", "Documentation (TEST-NET-1)", IPV4_REGISTRY, "unroutable"),
    _row("192.31.196.0/24", "AS112-v4", IPV4_REGISTRY, "unroutable"),
    _row("192.52.193.0/24", "AMT", IPV4_REGISTRY, "unroutable"),
    _row("192.88.99.0/24", "Deprecated (6to4 Relay Anycast)", IPV4_REGISTRY, "unroutable"),
    _row("192.168.0.0/16", "Private-Use", IPV4_REGISTRY, "private"),
    _row("192.175.48.0/24", "Direct Delegation AS112 Service", IPV4_REGISTRY, "unroutable"),
    # Benchmarking networks are labs' (and some local proxies' fake-IP DNS): reachable.
    _row("198.18.0.0/15", "Benchmarking", IPV4_REGISTRY, "private"),
    _row("198.51.100.0/24", "Documentation (TEST-NET-2)", IPV4_REGISTRY, "unroutable"),
    _row("203.0.113.0/24", "Documentation (TEST-NET-3)", IPV4_REGISTRY, "unroutable"),
    _row("224.0.0.0/4", "Multicast", IPV4_MULTICAST, "unroutable"),
    _row("240.0.0.0/4", "Reserved", IPV4_REGISTRY, "unroutable"),
    _row("255.255.255.255/32", "Limited Broadcast", IPV4_REGISTRY, "unroutable"),
    _row("100.100.100.200/32", "Alibaba Cloud metadata", CLOUD, "metadata"),
    # IPv6 special-purpose registry (RFC 6890 and its updates)
    _row("::1/128", "Loopback Address", IPV6_REGISTRY, "loopback"),
    _row("::/128", "Unspecified Address", IPV6_REGISTRY, "private"),
    _row("::ffff:0:0/96", "IPv4-mapped Address", IPV6_REGISTRY, "embedded"),
    _row("::/96", "IPv4-compatible Address (deprecated)", IPV6_SPACE, "embedded"),
    _row("64:ff9b::/96", "IPv4-IPv6 Translat. (NAT64)", IPV6_REGISTRY, "embedded"),
    _row("64:ff9b:1::/48", "IPv4-IPv6 Translat. (local use)", IPV6_REGISTRY, "private"),
    _row("100::/64", "Discard-Only Address Block", IPV6_REGISTRY, "unroutable"),
    _row("100:0:0:1::/64", "Dummy IPv6 Prefix", IPV6_REGISTRY, "unroutable"),
    # 2001::/23's own entries (PCP, TURN and DNS-SD anycast, AMT, AS112-v6, ORCHID,
    # drone IDs) are protocol addresses: refused with it, Teredo too (see the module).
    _row("2001::/23", "IETF Protocol Assignments", IPV6_REGISTRY, "unroutable"),
    _row("2001::/32", "TEREDO", IPV6_REGISTRY, "unroutable"),
    _row("2001:2::/48", "Benchmarking", IPV6_REGISTRY, "private"),
    _row("2001:db8::/32", "Documentation", IPV6_REGISTRY, "unroutable"),
    _row("2002::/16", "6to4", IPV6_REGISTRY, "embedded", 80),
    _row("2620:4f:8000::/48", "Direct Delegation AS112 Service", IPV6_REGISTRY,
         "unroutable"),
    _row("3fff::/20", "Documentation", IPV6_REGISTRY, "unroutable"),
    _row("5f00::/16", "Segment Routing (SRv6) SIDs", IPV6_REGISTRY, "unroutable"),
    _row("fc00::/7", "Unique-Local", IPV6_REGISTRY, "private"),
    _row("fe80::/10", "Link-Local Unicast (cloud metadata)", IPV6_REGISTRY, "metadata"),
    _row("fd00:ec2::254/128", "AWS instance metadata (IPv6)", CLOUD, "metadata"),
    # The IPv6 address space outside global unicast 2000::/3
    _row("fec0::/10", "Site-Local (deprecated)", IPV6_SPACE, "private"),
    _row("ff00::/8", "Multicast", IPV6_SPACE, "unroutable"),
    *(_row(block, "Reserved by IETF", IPV6_SPACE, "unroutable") for block in (
        "::/8", "100::/8", "200::/7", "400::/6", "800::/5", "1000::/4", "4000::/3",
        "6000::/3", "8000::/3", "a000::/3", "c000::/3", "e000::/4", "f000::/5",
        "f800::/6", "fe00::/9")),
)

_BY_SPECIFICITY = sorted(SPECIAL_RANGES, key=lambda row: -row.network.prefixlen)

LOCALHOST_NAMES = ("localhost",)
"""Names Chromium resolves to loopback itself, with every subdomain (``app.localhost``)."""

METADATA_HOSTS = frozenset({
    "metadata.google.internal", "metadata.goog", "metadata", "instance-data",
    "instance-data.ec2.internal", "metadata.azure.internal", "metadata.tencentyun.com",
})
_LOCALHOST_ROW = _row("127.0.0.0/8", "localhost name", "RFC 6761", "loopback")
_METADATA_NAME_ROW = _row("169.254.169.254/32", "cloud metadata name", CLOUD, "metadata")


@dataclass(frozen=True)
class AddressClass:
    """What an address is: its ``kind``, the registry row that says so (none for
    public addresses), and the IPv4 address it carries when it is an embedded form."""

    kind: Kind
    row: SpecialRange | None = None
    carried: ipaddress.IPv4Address | None = None

    @property
    def blocked_always(self) -> bool:
        return self.kind in ("metadata", "unroutable")

    @property
    def private(self) -> bool:
        """Loopback or private: refused unless the policy opens it."""
        return self.kind in ("loopback", "private")

    def describe(self) -> str:
        """E.g. ``100.64.0.0/10 Shared Address Space (carrier-grade NAT)``."""
        if self.row is None:
            return "a public address"
        text = f"{self.row.network} {self.row.name}"
        return f"{text}, carrying {self.carried}" if self.carried is not None else text


PUBLIC = AddressClass("public")


def classify(address: IPAddress) -> AddressClass:
    """The kind of ``address`` by the most specific row of ``SPECIAL_RANGES``; an
    embedded-IPv4 form is the kind of the address it carries."""
    if isinstance(address, ipaddress.IPv6Address) and address.scope_id:
        address = ipaddress.IPv6Address(address.compressed.split("%")[0])
    for row in _BY_SPECIFICITY:
        if row.network.version == address.version and address in row.network:
            if row.kind != "embedded":
                return AddressClass(row.kind, row)
            carried = ipaddress.IPv4Address((int(address) >> row.embedded_shift) & 0xFFFFFFFF)
            inner = classify(carried)
            return AddressClass(inner.kind, inner.row, carried)
    return PUBLIC


def host_address(host: str) -> IPAddress | None:
    """The IP address a host names literally, in any form Chromium accepts
    (``2852039166``, ``0xa9fea9fe`` and ``169.254.43518`` are 169.254.169.254), else None."""
    host = host.strip("[]")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if re.fullmatch(r"[0-9a-fx.]+", host) and any(c.isdigit() for c in host):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def is_localhost_name(host: str) -> bool:
    return any(host == name or host.endswith("." + name) for name in LOCALHOST_NAMES)


def classify_host(host: str) -> AddressClass | None:
    """A host as written: a literal address in any spelling, a ``localhost`` name
    (loopback), a cloud metadata name (metadata); None for any other name, which only
    the addresses it resolves to can classify (``resolver.py``)."""
    host = host.strip("[]").lower().rstrip(".")
    address = host_address(host)
    if address is not None:
        return classify(address)
    if is_localhost_name(host):
        return AddressClass("loopback", _LOCALHOST_ROW)
    if host in METADATA_HOSTS:
        return AddressClass("metadata", _METADATA_NAME_ROW)
    return None



def is_metadata_host(host: str) -> bool:
    found = classify_host(host)
    return found is not None and found.kind == "metadata"


def is_private_host(host: str) -> bool:
    """Loopback or private as written (a literal address or a ``localhost`` name)."""
    found = classify_host(host)
    return found is not None and found.private


def is_loopback_host(host: str) -> bool:
    """Loopback as written: 127.0.0.0/8, ::1 (or a form carrying 127/8), ``localhost``;
    not 0.0.0.0 or ::, which reach this machine but bind every interface."""
    found = classify_host(host)
    return found is not None and found.kind == "loopback"
