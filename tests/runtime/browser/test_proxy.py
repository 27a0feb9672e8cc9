"""The episode proxy's own life cycle: closing it ends the connections it still pipes."""

from __future__ import annotations

import asyncio
import socket
import threading

from linewise.runtime.browser.proxy import ProxyHub


def _silent_upstream() -> tuple[socket.socket, int]:
    """A loopback server that accepts and then never says a word."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.append(server.accept()[0]), daemon=True).start()
    return server, server.getsockname()[1]


async def test_closing_the_proxy_ends_a_tunnel_still_open() -> None:
    upstream, port = _silent_upstream()
    proxy = ProxyHub.shared().serve(lambda _host, _port: None)
    proxy_port = int(proxy.url.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy_port)
    writer.write(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
    assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
    assert len(proxy._connections.open) == 1  # piping, waiting on the silent server

    proxy.close()
    assert await asyncio.wait_for(reader.read(), 10) == b""  # the tunnel was ended
    for _ in range(100):
        if not proxy._connections.open:
            break
        await asyncio.sleep(0.05)
    assert not proxy._connections.open
    writer.close()
    upstream.close()
