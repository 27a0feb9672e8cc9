"""The episode proxy on real loopback sockets: its life cycle (closing it ends the
connections it still pipes), how it resolves names and what it connects to."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import threading
import time
from collections.abc import Callable

import pytest

from linewise.runtime.browser.addresses import IPAddress
from linewise.runtime.browser.guard import NavigationGuard
from linewise.runtime.browser.navigation import NavigationPolicy
from linewise.runtime.browser.proxy import ProxyHub, ProxyLimits, ProxyServer
from linewise.runtime.browser.resolver import Resolver, resolver_rules
from linewise.settings import NavigationSettings
from tests.support.leaky import LOOPBACK_NAME

PUBLIC_START = "https://shop.example.org/"


def _silent_upstream() -> tuple[socket.socket, int]:
    """A loopback server that accepts and then never says a word."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.append(server.accept()[0]), daemon=True).start()
    return server, server.getsockname()[1]


async def test_closing_the_proxy_ends_a_tunnel_still_open(caplog: pytest.LogCaptureFixture
                                                          ) -> None:
    caplog.set_level(logging.DEBUG, logger="asyncio")
    upstream, port = _silent_upstream()
    proxy = ProxyHub.shared().serve(lambda _to: None)
    proxy_port = int(proxy.url.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy_port)
    writer.write(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
    assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
    # and a connection that has not yet sent its request
    _idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", proxy_port)
    for _ in range(100):
        if len(proxy._connections.open) == 2:
            break
        await asyncio.sleep(0.05)
    assert len(proxy._connections.open) == 2  # piping, and waiting for a request

    proxy.close()
    assert await asyncio.wait_for(reader.read(), 10) == b""  # the tunnel was ended
    for _ in range(100):
        if not proxy._connections.open:
            break
        await asyncio.sleep(0.05)
    assert not proxy._connections.open
    # ended quietly: no "Exception in callback" from the stream server's own callback
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    writer.close()
    idle_writer.close()
    upstream.close()


class CountingServer:
    """A loopback TCP server that counts the connections it accepts and answers each
    with a tiny HTTP response."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._socket = socket.create_server((host, port))
        self.port: int = self._socket.getsockname()[1]
        self.hits = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return
            self.hits += 1
            with connection:
                connection.settimeout(2)
                try:
                    connection.recv(65536)
                    connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                except OSError:
                    pass

    def close(self) -> None:
        self._socket.close()


def _proxy(resolver: Resolver | None = None, **navigation: object) -> ProxyServer:
    policy = NavigationPolicy.for_task(NavigationSettings.model_validate(navigation),
                                       PUBLIC_START, devtools_port=9555)
    proxy = NavigationGuard(policy).open_proxy(*([resolver] if resolver else []))
    assert proxy is not None
    return proxy


async def _ask(proxy: ProxyServer, request: str) -> bytes:
    """Send one request through the proxy; its response (head, and body if any)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", int(proxy.url.rsplit(":", 1)[1]))
    try:
        writer.write(request.encode("latin-1"))
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        if head.startswith(b"HTTP/1.1 200 Connection"):
            writer.write(b"GET / HTTP/1.1\r\n\r\n")
            await writer.drain()
        return head + await asyncio.wait_for(reader.read(4096), 10)
    finally:
        writer.close()


def _get(host: str, port: int | str) -> str:
    return f"GET http://{host}:{port}/secret HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n"


def _connect(host: str, port: int | str) -> str:
    return f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n"


@pytest.mark.skipif(LOOPBACK_NAME is None, reason="this host name does not resolve to loopback")
async def test_a_name_that_resolves_to_loopback_reaches_no_loopback_port() -> None:
    assert LOOPBACK_NAME is not None
    target = CountingServer()
    proxy = _proxy()
    try:
        for request in (_get(LOOPBACK_NAME, target.port), _connect(LOOPBACK_NAME, target.port)):
            answer = await _ask(proxy, request)
            assert answer.startswith(b"HTTP/1.1 403"), answer
            assert f"{LOOPBACK_NAME} resolves to 127.".encode() in answer, answer
        assert target.hits == 0
        widened = _proxy(allow_private=True)  # the same name, so each zero is the policy's
        try:
            assert (await _ask(widened, _get(LOOPBACK_NAME, target.port))).endswith(b"ok")
            assert (await _ask(widened, _connect(LOOPBACK_NAME, target.port))).endswith(b"ok")
        finally:
            widened.close()
        assert target.hits == 2
    finally:
        proxy.close()
        target.close()


async def test_a_name_is_resolved_once_and_connected_at_the_decided_address() -> None:
    """DNS rebinding: each connection asks the resolver once and connects to the address
    the policy decided on, so an answer that changes reaches nothing it refuses."""
    allowed = CountingServer("127.0.0.2")
    refused = CountingServer("127.0.0.1", allowed.port)
    answers = iter([["127.0.0.2"], ["127.0.0.1"], ["127.0.0.2", "127.0.0.1"]])
    asked: list[str] = []

    async def rebinding(name: str, _port: int) -> list[IPAddress]:
        asked.append(name)
        return [ipaddress.ip_address(a) for a in next(answers)]

    proxy = _proxy(Resolver(resolve=rebinding), allow_domains=("127.0.0.2",))
    try:
        assert (await _ask(proxy, _get("rebind.test", allowed.port))).endswith(b"ok")
        second = await _ask(proxy, _get("rebind.test", allowed.port))
        assert second.startswith(b"HTTP/1.1 403") and b"resolves to 127.0.0.1" in second
        mixed = await _ask(proxy, _connect("rebind.test", allowed.port))
        assert mixed.startswith(b"HTTP/1.1 403"), mixed  # one refused address: refused
    finally:
        proxy.close()
        allowed.close()
        refused.close()
    assert asked == ["rebind.test"] * 3
    assert (allowed.hits, refused.hits) == (1, 0)


async def test_a_resolver_rule_maps_a_name_to_an_address_and_port() -> None:
    """``MAP name address:port`` is the operator's: the name is judged as the named site
    and connected at the rule's address and port, unless that address is metadata."""
    site = CountingServer()
    rules = resolver_rules([f"--host-resolver-rules=MAP site.test 127.0.0.1:{site.port},"
                            "MAP imds.test 169.254.169.254, MAP gone.test ~NOTFOUND"])
    proxy = _proxy(Resolver(rules))
    try:
        assert (await _ask(proxy, _get("site.test", 80))).endswith(b"ok")
        assert b"metadata" in await _ask(proxy, _get("imds.test", 80))
        assert (await _ask(proxy, _get("gone.test", 80))).startswith(b"HTTP/1.1 502")
    finally:
        proxy.close()
        site.close()
    assert site.hits == 1


async def test_a_port_past_65535_is_refused_not_wrapped() -> None:
    """A port past 65535 was checked as written and connected wrapped (the system
    resolver keeps 16 bits: ``localhost:99999999`` is port 57599): the DevTools port,
    played by a counting server, behind a port the policy has no rule for."""
    devtools = CountingServer()
    policy = NavigationPolicy.for_task(NavigationSettings(allow_private=True), PUBLIC_START,
                                       devtools_port=devtools.port)
    proxy = NavigationGuard(policy).open_proxy()
    assert proxy is not None
    wrapped = devtools.port + 65536 * 1000
    try:
        for request in (_connect("localhost", wrapped), _get("localhost", wrapped),
                        _connect("127.0.0.1", wrapped),
                        _connect("127.0.0.1", 0), _connect("127.0.0.1", "80a"),
                        _connect("127.0.0.1", "8\u00b2"), "CONNECT 127.0.0.1 HTTP/1.1\r\n\r\n"):
            answer = await _ask(proxy, request)
            assert answer.startswith(b"HTTP/1.1 400"), (request, answer)
        assert (await _ask(proxy, _connect("127.0.0.1", devtools.port))).startswith(
            b"HTTP/1.1 403")
    finally:
        proxy.close()
        devtools.close()
    assert devtools.hits == 0


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(100):
        if condition():
            return
        await asyncio.sleep(0.05)


async def test_a_connection_that_sends_no_request_head_is_closed_in_time() -> None:
    """Half-open connections held by a local client: each gets the head deadline."""
    proxy = ProxyHub.shared().serve(lambda _to: None, limits=ProxyLimits(0.5, 100))
    port = int(proxy.url.rsplit(":", 1)[1])
    try:
        silent = await asyncio.open_connection("127.0.0.1", port)
        dripping = await asyncio.open_connection("127.0.0.1", port)
        dripping[1].write(b"GET http://127.0.0.1/ HTTP/1.1\r\n")  # never ends its head
        started = time.perf_counter()
        for reader, writer in (silent, dripping):
            answer = await asyncio.wait_for(reader.read(), 5)
            assert answer.startswith(b"HTTP/1.1 408"), answer
            writer.close()
        assert time.perf_counter() - started < 4  # the deadline, not the 5 s wait
        await _until(lambda: not proxy._connections.open)
        assert not proxy._connections.open
    finally:
        proxy.close()


async def test_one_proxy_holds_at_most_its_cap_of_connections() -> None:
    target = CountingServer()
    proxy = ProxyHub.shared().serve(lambda _to: None, limits=ProxyLimits(30, 4))
    port = int(proxy.url.rsplit(":", 1)[1])
    held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(4)]
    try:
        await _until(lambda: len(proxy._connections.open) == 4)
        assert len(proxy._connections.open) == 4
        answer = await asyncio.wait_for(_ask(proxy, _get("127.0.0.1", target.port)), 5)
        assert answer.startswith(b"HTTP/1.1 503"), answer
        assert target.hits == 0
        for _, writer in held:
            writer.close()
        await _until(lambda: not proxy._connections.open)
        assert (await _ask(proxy, _get("127.0.0.1", target.port))).endswith(b"ok")
        assert target.hits == 1
    finally:
        proxy.close()
        target.close()


def test_the_limits_come_from_the_navigation_settings() -> None:
    settings = NavigationSettings(proxy_head_timeout_s=2.5, proxy_max_connections=64)
    assert ProxyLimits.from_settings(settings) == ProxyLimits(2.5, 64)
    assert ProxyLimits.from_settings() == ProxyLimits(5.0, 256)
