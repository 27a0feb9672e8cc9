"""Paths below a root, opened without following a symbolic link on the way.

The root is what the user named and may itself be a link; below it, each folder is
opened with ``O_NOFOLLOW`` from its parent's descriptor, so a link anywhere on the way
(``view -> elsewhere``, ``screenshots -> /``) is met as an error rather than followed,
and a link swapped in between a check and the use of a path changes nothing: there is
no later lookup by name to fool.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class LinkOnTheWay(OSError):
    """A folder on the way (``where``: the path under the root) is a link or no folder."""

    def __init__(self, where: str, cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror)
        self.where = where


@contextlib.contextmanager
def open_folder(root: Path, folders: Sequence[str], *, create: bool = False) -> Iterator[int]:
    """A descriptor of ``root/<folders>`` (made where missing when ``create``).

    Raises:
        FileNotFoundError: a folder is missing (and ``create`` is False).
        LinkOnTheWay: a folder on the way is a symbolic link, or not a folder.
    """
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for depth, part in enumerate(folders, 1):
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, dir_fd=fd)
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                raise
            except OSError as exc:
                raise LinkOnTheWay("/".join(folders[:depth]), exc) from None
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def read_below(root: Path, parts: Sequence[str]) -> bytes | None:
    """The plain file ``root/<parts>``; None when it is missing, or when it or a folder
    on the way is a link, or it is no plain file (a FIFO is not waited on)."""
    *folders, name = parts
    try:
        with open_folder(root, folders) as parent:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                         dir_fd=parent)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return handle.read()
