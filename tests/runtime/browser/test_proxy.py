"""The episode proxy's own life cycle: closing it ends the connections it still pipes."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading

import pytest

from linewise.runtime.browser.proxy import ProxyHub


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
    proxy = ProxyHub.shared().serve(lambda _host, _port: None)
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
