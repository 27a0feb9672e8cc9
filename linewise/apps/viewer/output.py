"""``ViewOutput``: the ``view/`` folder, written without ever following a symbolic link.

The folder shown is often not the viewer's own: a bench copied from another machine, a
run folder others can write into. A ``view`` entry there that is a symbolic link
(``view -> ~/site``), or a link inside it (``view/index.html -> ~/.bashrc``), made
``linewise view`` overwrite whatever it led to. So below the folder given (which the
user named, and may itself be a link) every folder is opened with ``O_NOFOLLOW`` from
its parent's descriptor, and every file is written as a fresh file renamed into place:
a link where linewise writes is refused with an error that names it, and a link put
there between the check and the write is replaced, never written through. Reading back
what an earlier build wrote (``read_text``) follows no link either (``nofollow.py``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from linewise.apps.viewer.nofollow import LinkOnTheWay, open_folder, read_below
from linewise.apps.viewer.paths import VIEW_DIR
from linewise.errors import ConfigError


class ViewOutput:
    """The ``view/`` folder of ``root``; paths are relative to ``view/`` (``data/x.js``)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.view = root / VIEW_DIR

    def write_text(self, rel: str, text: str) -> None:
        """Write ``view/<rel>`` whole (a new file renamed over the old one).

        Raises:
            ConfigError: a folder on the way, or the file itself, is a symbolic link
                (or not what it must be: a file where a folder goes).
        """
        try:
            self._write(rel, text)
        except FileNotFoundError as exc:  # a folder removed under the build
            raise self._error(rel, exc) from None
        except ConfigError:
            raise
        except OSError as exc:  # read-only, full, not allowed
            raise self._error(rel, exc) from None

    def _write(self, rel: str, text: str) -> None:
        *folders, name = rel.split("/")
        with self._folder(folders) as parent:
            self._refuse_link(parent, name, rel)
            tmp = f".{name}.{os.getpid()}.tmp"
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=parent)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o666, dir_fd=parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(text)
                os.rename(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=parent)
                raise

    def read_text(self, rel: str) -> str | None:
        """``view/<rel>`` as an earlier build wrote it; None when it is not there, or
        when it or a folder on the way is a link (not followed) or no plain file."""
        body = read_below(self.root, [VIEW_DIR, *rel.split("/")])
        return body.decode("utf-8", errors="replace") if body is not None else None

    def unlink(self, rel: str) -> None:
        """Remove ``view/<rel>`` if it is there (a link is removed, not followed)."""
        *folders, name = rel.split("/")
        try:
            with self._folder(folders, create=False) as parent:
                os.unlink(name, dir_fd=parent)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise self._error(rel, exc) from None

    def mtime(self, rel: str) -> float | None:
        """When ``view/<rel>`` was written (None: not there, or not a plain file)."""
        *folders, name = rel.split("/")
        try:
            with self._folder(folders, create=False) as parent:
                info = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return None
        return info.st_mtime if stat.S_ISREG(info.st_mode) else None

    @contextlib.contextmanager
    def _folder(self, folders: list[str], create: bool = True) -> Iterator[int]:
        """A descriptor of ``view/<folders>``, opened link by link from the root."""
        try:
            with open_folder(self.root, [VIEW_DIR, *folders], create=create) as fd:
                yield fd
        except LinkOnTheWay as exc:
            raise self._error(exc.where.removeprefix(VIEW_DIR).lstrip("/"), exc) from None

    def _refuse_link(self, parent: int, name: str, rel: str) -> None:
        try:
            info = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(info.st_mode):
            raise self._error(rel, OSError(errno.ELOOP, "symbolic link"))
        if stat.S_ISDIR(info.st_mode):
            raise self._error(rel, OSError(errno.EISDIR, "a folder"))

    def _error(self, rel: str, exc: OSError) -> ConfigError:
        path = self.view / rel if rel else self.view
        if exc.errno == errno.ELOOP or path.is_symlink():
            target = os.readlink(path) if path.is_symlink() else "?"
            return ConfigError(
                f"{path} is a symbolic link (to {target}): linewise view writes only into "
                "a view folder of its own and never through a link; remove the link, or "
                "view a copy of the folder")
        if exc.errno == errno.ENOTDIR:
            return ConfigError(f"{path} is not a folder: linewise view writes its files there; "
                               "remove it, or view a copy of the folder")
        if exc.errno == errno.EISDIR:
            return ConfigError(f"{path} is a folder where the viewer writes a file; remove it")
        return ConfigError(f"{path}: cannot write the viewer there: {exc.strerror or exc}")
