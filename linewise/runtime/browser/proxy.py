"""A local HTTP proxy that every connection of an episode's browser context goes through.

Playwright's routes see neither the hops of a sub-resource's redirect chain nor
WebSockets (``route_web_socket`` needs Playwright 1.48; browsergym-core pins 1.44), and a
page can always reach pristine constructors through a fresh iframe or a worker, so no
script can stand guard. Chromium's network stack itself is the one place nothing gets
past: each context is given this proxy (``--proxy-bypass-list=<-loopback>``, which
Playwright adds, sends loopback through it too), and every connection Chromium opens —
a plain HTTP request, a redirect hop, a ``CONNECT`` tunnel for https, ws and wss — is
checked by host and port against the episode's policy before the proxy connects it.

A name is resolved once (``resolver.py``), the policy decides on the addresses it
resolved to as if they were written literally, and the proxy connects to exactly those
addresses, never to the name again: a name in /etc/hosts or a DNS answer that points at
loopback or a private network is refused like the address itself, and a second, different
answer (DNS rebinding) is never asked for.

The proxy listens on loopback, where any local client (or a page allowed there) may
connect to it: a connection has ``head_timeout_s`` to send its request head, and one
proxy holds at most ``max_connections`` connections (``ProxyLimits``, from the
navigation settings); past the cap a new connection is answered 503 and closed.

One daemon thread runs one event loop for every episode's proxy of the process, so the
async environment and BrowserGym's sync worker thread use it alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import structlog

from linewise.runtime.browser.resolver import Destination, Resolver
from linewise.settings import NavigationSettings

log = structlog.get_logger(__name__)

Refusal = Callable[[Destination], "str | None"]
"""A connection's destination -> why it is refused, or None to connect it."""

MAX_HEAD = 64 * 1024
CONNECT_TIMEOUT_S = 30.0
CHUNK = 64 * 1024
_HOP_HEADERS = (b"proxy-connection", b"connection", b"keep-alive")


@dataclass(frozen=True)
class ProxyLimits:
    """How long a connection may take to send its request head, and how many
    connections one proxy holds at once."""

    head_timeout_s: float
    max_connections: int

    @classmethod
    def from_settings(cls, settings: NavigationSettings | None = None) -> ProxyLimits:
        """The settings' limits (the defaults without settings)."""
        settings = settings or NavigationSettings()
        return cls(settings.proxy_head_timeout_s, settings.proxy_max_connections)


@dataclass
class ProxyServer:
    """One episode's proxy: ``url`` is what the browser context's ``proxy`` names."""

    url: str
    _server: asyncio.base_events.Server = field(repr=False)
    _loop: asyncio.AbstractEventLoop = field(repr=False)
    _connections: _Connection = field(repr=False)

    def close(self) -> None:
        """Stop accepting connections and end the open ones (safe from any thread, more
        than once)."""
        self._loop.call_soon_threadsafe(self._server.close)
        self._loop.call_soon_threadsafe(self._connections.end_all)


class ProxyHub:
    """The process's proxy thread; ``serve`` starts one episode's proxy on it."""

    _shared: ProxyHub | None = None
    _shared_lock = threading.Lock()

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="linewise-proxy",
                                        daemon=True)
        self._thread.start()

    @classmethod
    def shared(cls) -> ProxyHub:
        with cls._shared_lock:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared

    def serve(self, refusal: Refusal, resolver: Resolver | None = None,
              limits: ProxyLimits | None = None) -> ProxyServer:
        """A new proxy on a free loopback port, checking every connection with
        ``refusal``; ``resolver`` turns hosts into addresses (with the ``MAP`` rules of
        Chromium's ``--host-resolver-rules``, which Chromium behind a proxy leaves to it)."""
        handler = _Connection(refusal, resolver or Resolver(),
                              limits or ProxyLimits.from_settings())
        future = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(handler.serve, "127.0.0.1", 0, limit=MAX_HEAD), self._loop)
        server = future.result(timeout=10)
        port = server.sockets[0].getsockname()[1]
        return ProxyServer(f"http://127.0.0.1:{port}", server, self._loop, handler)


class _Connection:
    def __init__(self, refusal: Refusal, resolver: Resolver, limits: ProxyLimits) -> None:
        self.refusal = refusal
        self.resolver = resolver
        self.limits = limits
        self._warned_full = False
        # The loop keeps only weak references to tasks: without these, a connection
        # still piping when its context closes is collected mid-await.
        self.open: set[asyncio.Task[Any]] = set()

    def end_all(self) -> None:
        """Cancel every open connection (on the proxy's loop)."""
        for task in list(self.open):
            task.cancel()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self.open) >= self.limits.max_connections:
            if not self._warned_full:
                self._warned_full = True
                log.warning("proxy connections at their cap, refusing more",
                            max_connections=self.limits.max_connections)
            # The head is read first (within its deadline): closing a socket with unread
            # data sends a reset, and the client would see that instead of the 503.
            with contextlib.suppress(TimeoutError, asyncio.IncompleteReadError,
                                     asyncio.LimitOverrunError, ConnectionError):
                await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"),
                                       self.limits.head_timeout_s)
            await _answer(writer, 503, "too many connections to the proxy")
            await _close(writer)
            return
        task = asyncio.current_task()
        if task is not None:
            self.open.add(task)
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"),
                                              self.limits.head_timeout_s)
            except TimeoutError:
                log.debug("proxy connection sent no request head in time")
                await _answer(writer, 408, "no request head in "
                              f"{self.limits.head_timeout_s:g} s")
                return
            await self._handle(head, reader, writer)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError,
                OSError, ValueError) as exc:
            log.debug("proxy connection ended", error=str(exc)[:200])
        except asyncio.CancelledError:
            # Ended by close(). The stream server's own callback asks this task for its
            # exception, and a cancelled task answers by raising, which the loop logs as
            # an error: the handler ends normally instead.
            log.debug("proxy connection ended with its proxy")
        except Exception:  # a bug here must cost one connection, never the proxy thread
            log.exception("proxy connection failed")
        finally:
            self.open.discard(task)
            await _close(writer)

    async def _handle(self, head: bytes, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        request_line, _, headers = head.partition(b"\r\n")
        method, target, version = request_line.decode("latin-1").split(" ", 2)
        connect = method.upper() == "CONNECT"
        if connect:
            authority, path = target, ""
        else:
            parts = urlsplit(target)
            if parts.scheme != "http" or not parts.netloc:
                await _answer(writer, 400, "the proxy takes absolute http URLs only")
                return
            authority = parts.netloc.rpartition("@")[2]
            path = parts.path or "/"
            if parts.query:
                path += "?" + parts.query
        host, port_text = _split_authority(authority)
        port = _port(port_text or ("" if connect else "80"))
        if not host or port is None:
            await _answer(writer, 400, f"{authority!r} is not a host and a port in 1-65535")
            return
        try:
            destination = await asyncio.wait_for(self.resolver.destination(host, port),
                                                 CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError) as exc:
            await _answer(writer, 502, f"cannot resolve {host}: {exc}")
            return
        reason = self.refusal(destination)
        if reason is not None:
            log.debug("connection refused by the policy", host=host, port=port, reason=reason)
            await _answer(writer, 403, reason)
            return
        try:
            upstream_reader, upstream = await asyncio.wait_for(_connect(destination),
                                                               CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError) as exc:
            await _answer(writer, 502, f"cannot connect to {host}:{port}: {exc}")
            return
        try:
            if connect:
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                await writer.drain()
            else:
                upgrade = b"\nupgrade:" in headers.lower()
                upstream.write(_request_head(method, path, version, headers, upgrade))
                await upstream.drain()
                if not upgrade:  # one request per connection: the next may name another host
                    response = await upstream_reader.readuntil(b"\r\n\r\n")
                    writer.write(_close_after(response))
            await asyncio.gather(_pipe(reader, upstream), _pipe(upstream_reader, writer))
        finally:
            await _close(upstream)


def _split_authority(authority: str) -> tuple[str, str]:
    """The host and the port text of ``host:port``, ``[v6]:port``, ``host`` or ``[v6]``."""
    if authority.startswith("["):
        host, _, rest = authority[1:].partition("]")
        return host, rest[1:] if rest.startswith(":") else rest
    if authority.count(":") > 1:  # a bare IPv6 address, its port after the last colon
        host, _, port = authority.rpartition(":")
        return host, port
    host, _, port = authority.partition(":")
    return host, port


def _port(text: str) -> int | None:
    """A port in 1-65535 written in ASCII digits, else None: a larger one would wrap
    (``99999999`` is 57599 to the socket) after the policy checked it as written."""
    if not (text.isascii() and text.isdigit()) or not 0 < int(text) < 65536:
        return None
    return int(text)


async def _connect(destination: Destination
                   ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to the first of the destination's decided addresses that answers;
    numeric only (``AI_NUMERICHOST``), so nothing is resolved a second time."""
    error: OSError | None = None
    for address in destination.addresses:
        try:
            return await asyncio.open_connection(
                address.compressed, destination.connect_port, limit=MAX_HEAD,
                flags=socket.AI_NUMERICHOST)
        except OSError as exc:
            error = exc
    raise error or OSError(f"{destination.host} has no address")


def _request_head(method: str, path: str, version: str, headers: bytes, upgrade: bool
                  ) -> bytes:
    kept = [line for line in headers.split(b"\r\n") if line and (
        (upgrade and not line.lower().startswith(b"proxy-connection"))
        or line.split(b":", 1)[0].strip().lower() not in _HOP_HEADERS)]
    if not upgrade:
        kept.append(b"Connection: close")
    return f"{method} {path} {version}\r\n".encode("latin-1") + b"\r\n".join(kept) + (
        b"\r\n\r\n")


def _close_after(response_head: bytes) -> bytes:
    """The response head with ``Connection: close``, so the browser sends its next
    request on a new connection, checked again."""
    status, _, rest = response_head.partition(b"\r\n")
    lines = [line for line in rest.split(b"\r\n") if line and (
        line.split(b":", 1)[0].strip().lower() not in _HOP_HEADERS)]
    return status + b"\r\n" + b"\r\n".join([*lines, b"Connection: close"]) + b"\r\n\r\n"


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while chunk := await source.read(CHUNK):
            sink.write(chunk)
            await sink.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            if sink.can_write_eof():
                sink.write_eof()


async def _answer(writer: asyncio.StreamWriter, status: int, reason: str) -> None:
    body = f"linewise: {reason}\n".encode()
    writer.write(f"HTTP/1.1 {status} Refused\r\nContent-Type: text/plain\r\n"
                 f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
    with contextlib.suppress(ConnectionError, OSError):
        await writer.drain()


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(ConnectionError, OSError):
        await writer.wait_closed()
