"""Where the policy proxy connects: a connection's host, as the browser wrote it, turned
once into the addresses that the policy decides on and the proxy connects to.

Rules:

- A literal address, in any spelling, is itself in its canonical form (``2130706433``
  is 127.0.0.1): nothing re-reads the text later.
- ``localhost`` names are 127.0.0.1 and ::1, as Chromium resolves them itself (never DNS).
- A name with a ``MAP`` rule of Chromium's ``--host-resolver-rules`` flag is the rule's
  address (and port): the operator's own statement, which test suites use to stand a
  local server in for a named site. Chromium resolves nothing itself behind a proxy, so
  the proxy honours the rules in its place (``MAP pattern host[:port]`` with ``*``
  globs, ``MAP pattern ~NOTFOUND``, ``EXCLUDE pattern``; the first matching rule wins).
- Any other name is resolved once, by the system resolver (``getaddrinfo``: /etc/hosts,
  then DNS). Every address of the answer is decided on, and the proxy connects to those
  addresses and never to the name, so a later answer (DNS rebinding) is never asked for.

``by_name`` says how the policy judges a destination (``NavigationPolicy
.connection_refusal``): localhost and MAP names by the name as written (their addresses
only by the always-refused rules), every other name by each address it resolved to,
with the same rules as a literal address.
"""

from __future__ import annotations

import asyncio
import fnmatch
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from linewise.runtime.browser.addresses import IPAddress, host_address, is_localhost_name

SystemResolve = Callable[[str, int], Awaitable[Sequence[IPAddress]]]
"""``(name, port)`` -> its addresses; raises ``OSError`` (``socket.gaierror``) when it has
none. The default asks ``getaddrinfo``; tests may stand a resolver of their own in."""

LOOPBACK = (host_address("127.0.0.1"), host_address("::1"))
NOT_FOUND = "~NOTFOUND"


@dataclass(frozen=True)
class Destination:
    """A connection's target: ``host`` and ``port`` as written (host canonical), the
    ``addresses`` decided on and connected to (in order), on ``connect_port``."""

    host: str
    port: int
    addresses: tuple[IPAddress, ...]
    connect_port: int
    by_name: bool = False


@dataclass(frozen=True)
class ResolverRule:
    """One ``MAP pattern replacement`` or ``EXCLUDE pattern`` rule."""

    pattern: str
    replacement: str | None
    """None for ``EXCLUDE``."""

    def matches(self, host: str) -> bool:
        return fnmatch.fnmatchcase(host, self.pattern)


def resolver_rules(args: Sequence[str]) -> tuple[ResolverRule, ...]:
    """The rules of the ``--host-resolver-rules`` Chromium flags among ``args``."""
    rules: list[ResolverRule] = []
    for arg in args:
        if not arg.startswith("--host-resolver-rules="):
            continue
        for rule in arg.split("=", 1)[1].strip("\"'").split(","):
            parts = rule.split()
            if len(parts) == 3 and parts[0].upper() == "MAP":
                rules.append(ResolverRule(parts[1].lower(), parts[2]))
            elif len(parts) == 2 and parts[0].upper() == "EXCLUDE":
                rules.append(ResolverRule(parts[1].lower(), None))
    return tuple(rules)


async def system_resolve(name: str, port: int) -> list[IPAddress]:
    infos = await asyncio.get_running_loop().getaddrinfo(
        name, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    found = [host_address(str(info[4][0]).split("%")[0]) for info in infos]
    return [address for address in found if address is not None]


class Resolver:
    """Turns ``(host, port)`` into a ``Destination`` (see the module's rules)."""

    def __init__(self, rules: Sequence[ResolverRule] = (),
                 resolve: SystemResolve = system_resolve) -> None:
        self.rules = tuple(rules)
        self._resolve = resolve

    async def destination(self, host: str, port: int) -> Destination:
        """Raises ``OSError`` when the name has no address (or a rule says so)."""
        host = host.strip("[]").lower().rstrip(".")
        address = host_address(host)
        if address is not None:
            return Destination(address.compressed, port, (address,), port)
        if is_localhost_name(host):
            return Destination(host, port, _loopback(), port, by_name=True)
        rule = next((r for r in self.rules if r.matches(host)), None)
        if rule is None or rule.replacement is None:
            return Destination(host, port, await self._addresses(host, port), port)
        if rule.replacement == NOT_FOUND:
            raise socket.gaierror(socket.EAI_NONAME, f"{host} is ~NOTFOUND by a resolver rule")
        target, target_port = _split_port(rule.replacement, port)
        mapped = host_address(target)
        addresses = ((mapped,) if mapped is not None else _loopback()
                     if is_localhost_name(target) else await self._addresses(target, port))
        return Destination(host, port, addresses, target_port, by_name=True)

    async def _addresses(self, name: str, port: int) -> tuple[IPAddress, ...]:
        found = tuple(dict.fromkeys(await self._resolve(name, port)))
        if not found:
            raise socket.gaierror(socket.EAI_NONAME, f"{name} has no address")
        return found


def _loopback() -> tuple[IPAddress, ...]:
    return tuple(address for address in LOOPBACK if address is not None)


def _split_port(replacement: str, port: int) -> tuple[str, int]:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port`` of a MAP rule (a port outside
    1-65535 is ignored)."""
    host, port_text = replacement, ""
    if replacement.startswith("["):
        host, _, rest = replacement[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    elif replacement.count(":") == 1:
        host, _, port_text = replacement.partition(":")
    if port_text.isdigit() and 0 < int(port_text) < 65536:
        return host, int(port_text)
    return host, port
