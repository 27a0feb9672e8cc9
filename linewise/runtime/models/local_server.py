"""The supervisor of the embedded local model server: start, health-check and stop it.

A GGUF file (by default the embedded model, see ``files``) is served by llama.cpp's
OpenAI-compatible server in a child process (``server_process``), so that a crash or a
kill of the model does not take the agent down and ``stop()`` gives the memory back.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

import structlog

from linewise.cache import cache_root
from linewise.errors import ConfigError, ModelError
from linewise.runtime.models import server_process
from linewise.runtime.models.files import EMBEDDED_MODEL, resolve_model_path
from linewise.runtime.models.server_process import EXIT_PORT_IN_USE, default_threads
from linewise.runtime.secret_env import child_environment
from linewise.settings import DEFAULT_CONTEXT_TOKENS

log = structlog.get_logger(__name__)

_LOG_ROTATE_BYTES = 10 * 1024 * 1024


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free right now on ``host`` (bind port 0, read it, release it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def _tail(path: Path, offset: int = 0, lines: int = 30) -> str:
    """The last ``lines`` lines written to ``path`` after byte ``offset``."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            end = handle.tell()
            start = max(offset, end - 64 * 1024)
            handle.seek(start)
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class LocalModelServer:
    """llama.cpp's OpenAI-compatible server for one GGUF file, in a child process.

    Usage::

        async with LocalModelServer() as server:          # None: the embedded model
            client = openai.AsyncOpenAI(base_url=server.base_url, api_key="local")

    The child listens on a free port of 127.0.0.1; its stdout and stderr go to
    ``log_path``. It also exits by itself when this process dies (it watches its stdin
    pipe), so no orphan keeps 3 GB of memory.

    Prompt caching: one slot (``parallel=1``) keeps the KV cache of the previous request,
    so a request that starts with the same messages only evaluates the new tail
    (``usage.prompt_tokens_details.cached_tokens`` tells how much was reused); prompts that
    differ in the middle reuse matching chunks of at least ``cache_reuse`` tokens by KV
    shifting; and up to ``cache_ram_mib`` of earlier prompt states are kept in RAM.
    """

    def __init__(
        self,
        model_path: Path | str | None = None,
        *,
        model_name: str | None = None,
        ctx_size: int = DEFAULT_CONTEXT_TOKENS,
        threads: int | None = None,
        parallel: int = 1,
        startup_timeout_s: float = 180.0,
        stop_timeout_s: float = 10.0,
        cache_ram_mib: int = 2048,
        cache_reuse: int = 256,
        repack: bool | None = None,
        log_path: Path | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        """Configure (nothing starts until :meth:`start`).

        Args:
            model_path: a GGUF file, or ``None`` for the embedded model (assembled on start).
            model_name: the name the server reports and accepts (default: the embedded
                model's name, or the file's stem).
            ctx_size: context window in tokens, shared by the slots (Qwen2.5 supports 32k;
                the KV cache costs 28 KiB per token in f16, 896 MiB at 32k).
            threads: CPU threads for prompt processing and generation (default: all CPUs
                this process may use).
            parallel: concurrent request slots (each gets up to ``ctx_size`` tokens from a
                unified KV cache when > 1).
            startup_timeout_s: how long :meth:`start` waits for ``/health``.
            stop_timeout_s: grace period between SIGTERM and SIGKILL.
            cache_ram_mib: RAM for llama.cpp's prompt cache of earlier prompts (0: off).
            cache_reuse: minimum chunk (tokens) reused by KV shifting (0: off).
            repack: use llama.cpp's extra CPU buffer types (weight repacking, and AMX on
                CPUs that have it). ``None``: on, unless this build would use AMX (see
                :func:`server_process.amx_in_use`), whose kernels crash on some Xeon CPUs.
            log_path: where the child's output goes (default
                ``<cache_root>/logs/local-model.log``).
            host: interface to listen on.
        """
        if ctx_size < 256:
            raise ConfigError(f"ctx_size must be at least 256 tokens, got {ctx_size}")
        if parallel < 1:
            raise ConfigError(f"parallel must be at least 1, got {parallel}")
        if threads is not None and threads < 1:
            raise ConfigError(f"threads must be at least 1, got {threads}")
        self._model_path = Path(model_path) if model_path is not None else None
        if model_name is not None:
            self._model_name = model_name
        elif self._model_path is None:
            self._model_name = EMBEDDED_MODEL.name
        else:
            self._model_name = self._model_path.stem
        self.ctx_size = ctx_size
        self.threads = threads if threads is not None else default_threads()
        self.parallel = parallel
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.cache_ram_mib = cache_ram_mib
        self.cache_reuse = cache_reuse
        self.repack = repack
        self.host = host
        self._log_path = log_path or cache_root() / "logs" / "local-model.log"
        self._log_offset = 0
        self._port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None

    # -- properties

    @property
    def model_name(self) -> str:
        """The model name to send in requests (also what ``/v1/models`` lists)."""
        return self._model_name

    @property
    def model_path(self) -> Path | None:
        """The GGUF file served (``None`` for the embedded model until started)."""
        return self._model_path

    @property
    def log_path(self) -> Path:
        """The file that receives the child's stdout and stderr."""
        return self._log_path

    @property
    def port(self) -> int:
        """The port the server listens on (only known once started)."""
        if self._port is None:
            raise ModelError("The local model server has not been started")
        return self._port

    @property
    def base_url(self) -> str:
        """OpenAI-compatible base URL, e.g. ``http://127.0.0.1:41234/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        """Process id of the child, while it runs."""
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        """Whether the child process is alive."""
        return self._process is not None and self._process.poll() is None

    # -- lifecycle

    async def start(self) -> None:
        """Launch the child and wait until ``/health`` answers 200.

        Raises:
            ModelError: the model cannot be resolved, the child exits early (the message
                carries the end of its log), or it is not healthy within
                ``startup_timeout_s``.
        """
        if self.running:
            return
        requested = str(self._model_path) if self._model_path is not None else None
        self._model_path = await asyncio.to_thread(resolve_model_path, requested)
        attempts = 3  # a port taken between probing and binding is retried with a new one
        for attempt in range(1, attempts + 1):
            self._port = free_port(self.host)
            self._spawn()
            try:
                await self._wait_healthy()
                return
            except _PortInUse:
                await self._reap()
                if attempt == attempts:
                    raise ModelError(
                        f"The local model server could not bind a port after {attempts} "
                        f"attempts; see {self._log_path}"
                    ) from None
                log.warning("port taken, retrying", port=self._port)
            except BaseException:
                await self.stop()
                raise

    async def stop(self) -> None:
        """Terminate the child (SIGTERM, then SIGKILL after ``stop_timeout_s``)."""
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                await asyncio.to_thread(process.wait, self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                log.warning("local model server ignored SIGTERM, killing", pid=process.pid)
                process.kill()
                await asyncio.to_thread(process.wait)
        await self._reap()
        log.info("local model server stopped", pid=process.pid, returncode=process.returncode)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()

    # -- internals

    def command(self) -> list[str]:
        """The child's command line (for logs and for running it by hand)."""
        assert self._model_path is not None and self._port is not None
        command = [
            sys.executable, "-m", server_process.__name__, "serve",
            "--model", str(self._model_path),
            "--host", self.host,
            "--port", str(self._port),
            "--ctx", str(self.ctx_size),
            "--threads", str(self.threads),
            "--parallel", str(self.parallel),
            "--alias", self._model_name,
            "--cache-ram", str(self.cache_ram_mib),
            "--cache-reuse", str(self.cache_reuse),
            "--exit-on-stdin-eof",
        ]  # fmt: skip
        if self.repack is not None:
            command.append("--repack" if self.repack else "--no-repack")
        return command

    def _open_log(self) -> IO[bytes]:
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            if self._log_path.stat().st_size > _LOG_ROTATE_BYTES:
                os.replace(self._log_path, self._log_path.with_name(self._log_path.name + ".1"))
        handle = open(self._log_path, "ab")  # noqa: SIM115 - handed to the child
        self._log_offset = handle.tell()
        stamp = datetime.now().isoformat(timespec="seconds")
        handle.write(f"\n=== {stamp} linewise: {' '.join(self.command())}\n".encode())
        handle.flush()
        return handle

    def _spawn(self) -> None:
        command = self.command()
        log_handle = self._open_log()
        try:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=log_handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches us, not the model; we stop it
                close_fds=True,
                env=child_environment(),  # no secret's or key's variable
            )
        except OSError as exc:
            raise ModelError(f"Cannot launch the local model server: {exc}") from exc
        finally:
            log_handle.close()
        log.info(
            "local model server launched",
            pid=self._process.pid,
            port=self._port,
            model=str(self._model_path),
            ctx_size=self.ctx_size,
            threads=self.threads,
            log=str(self._log_path),
        )

    async def _wait_healthy(self) -> None:
        httpx = _http_client_module()
        url = f"http://{self.host}:{self.port}/health"
        deadline = time.monotonic() + self.startup_timeout_s
        started = time.monotonic()
        async with httpx.AsyncClient(timeout=5.0, trust_env=False) as client:
            while True:
                process = self._process
                assert process is not None
                if process.poll() is not None:
                    tail = _tail(self._log_path, self._log_offset)
                    if process.returncode == EXIT_PORT_IN_USE or "couldn't bind" in tail:
                        raise _PortInUse
                    raise ModelError(
                        f"The local model server exited with code {process.returncode} while "
                        f"starting ({_describe_returncode(process.returncode)}). "
                        f"Last lines of {self._log_path}:\n{tail}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    response = await client.get(url)
                    if response.status_code == 200:
                        log.info(
                            "local model server ready",
                            base_url=self.base_url,
                            seconds=round(time.monotonic() - started, 1),
                        )
                        return
                if time.monotonic() > deadline:
                    tail = _tail(self._log_path, self._log_offset)
                    raise ModelError(
                        f"The local model server was not healthy after "
                        f"{self.startup_timeout_s:.0f} s. Last lines of {self._log_path}:\n{tail}"
                    )
                await asyncio.sleep(0.25)

    async def _reap(self) -> None:
        process = self._process
        if process is None:
            return
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
        if process.poll() is None:
            process.kill()
            await asyncio.to_thread(process.wait)
        self._process = None


class _PortInUse(Exception):
    """The child could not bind its port (someone took it after we probed it)."""


def _http_client_module() -> Any:
    """httpx2 (what openai>=2 ships with) or httpx (older openai)."""
    try:
        import httpx2
    except ImportError:
        import httpx

        return httpx
    return httpx2


def _describe_returncode(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"
