"""A direct DevTools websocket for the bulk reads of observation extraction.

Playwright relays CDP answers through its driver process and walks every answer in
Python; for the accessibility tree of a large page (tens of MB of JSON) that costs
seconds. Chromium is therefore also started with a DevTools port on 127.0.0.1, and
``CDPConnection`` talks to one page target directly: one ``json.loads`` per answer.
Playwright stays in charge of everything else (navigation, input, frames).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from typing import Any, Protocol

import structlog
import websockets
from websockets.asyncio.client import ClientConnection

from linewise.errors import BrowserError, CDPError

log = structlog.get_logger(__name__)


class CDPSender(Protocol):
    """What observation extraction needs: Playwright's ``CDPSession`` or ``CDPConnection``."""

    async def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]: ...


class CDPConnection:
    """One websocket to one page target; commands may be sent concurrently."""

    def __init__(self, websocket: ClientConnection, url: str) -> None:
        self._ws = websocket
        self.url = url
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader = asyncio.create_task(self._read(), name=f"cdp-reader {url}")

    @classmethod
    async def connect(cls, port: int, target_id: str, timeout_s: float = 5.0) -> CDPConnection:
        url = f"ws://127.0.0.1:{port}/devtools/page/{target_id}"
        try:
            websocket = await asyncio.wait_for(
                websockets.connect(url, max_size=None, ping_interval=None), timeout_s
            )
        except (OSError, TimeoutError, websockets.WebSocketException) as exc:
            raise BrowserError(f"Cannot open DevTools websocket {url}: {exc}") from exc
        return cls(websocket, url)

    async def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        if self._reader.done():
            raise CDPError("DevTools websocket closed", url=self.url)
        message_id = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[message_id] = future
        try:
            await self._ws.send(json.dumps({"id": message_id, "method": method,
                                            "params": params or {}}))
            return await future
        finally:
            self._pending.pop(message_id, None)

    async def _read(self) -> None:
        try:
            async for raw in self._ws:
                message = json.loads(raw)
                future = self._pending.get(message.get("id", -1))
                if future is None or future.done():
                    continue  # an event, or an answer nobody waits for any more
                if "error" in message:
                    error = message["error"]
                    future.set_exception(CDPError(
                        str(error.get("message")), url=self.url, code=_error_code(error)
                    ))
                else:
                    future.set_result(message.get("result", {}))
        except websockets.WebSocketException:
            pass
        finally:
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(CDPError("DevTools websocket closed", url=self.url))

    @property
    def closed(self) -> bool:
        return self._reader.done()

    async def close(self) -> None:
        with contextlib.suppress(websockets.WebSocketException, OSError):
            await self._ws.close()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


def _error_code(error: dict[str, Any]) -> int | None:
    code = error.get("code")
    return code if isinstance(code, int) else None
