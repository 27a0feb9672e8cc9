"""The direct DevTools websocket: answers, and errors as typed ``CDPError``s."""

from __future__ import annotations

import json

import pytest
from websockets.asyncio.server import ServerConnection, serve

from linewise.errors import BrowserError, CDPError, LinewiseError
from linewise.runtime.browser.cdp import CDPConnection


async def _devtools(websocket: ServerConnection) -> None:
    """A stand-in page target: answers Echo, refuses everything else as Chromium does."""
    async for raw in websocket:
        message = json.loads(raw)
        if message["method"] == "Echo":
            answer = {"id": message["id"], "result": message["params"]}
        elif message["method"] == "Close":
            await websocket.close()
            return
        else:
            answer = {"id": message["id"],
                      "error": {"code": -32601, "message": f"'{message['method']}' wasn't found"}}
        await websocket.send(json.dumps(answer))


async def test_errors_carry_the_devtools_code_and_the_websocket() -> None:
    async with serve(_devtools, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        connection = await CDPConnection.connect(port, "T1")
        url = f"ws://127.0.0.1:{port}/devtools/page/T1"
        try:
            assert await connection.send("Echo", {"x": 1}) == {"x": 1}

            with pytest.raises(CDPError) as info:
                await connection.send("Nope.method")
            assert (info.value.code, info.value.url) == (-32601, url)
            assert str(info.value) == "'Nope.method' wasn't found (-32601)"
            assert isinstance(info.value, BrowserError | LinewiseError)

            with pytest.raises(CDPError) as closed:
                await connection.send("Close")
            assert (closed.value.code, closed.value.url) == (None, url)
            assert str(closed.value) == f"DevTools websocket closed ({url})"
        finally:
            await connection.close()
