"""Files written whole, files in installed packages, and the sha256 check with its
sidecar memo."""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import stat
import sys
import uuid
from pathlib import Path

import pytest

from linewise.files import (
    package_dirs,
    package_file,
    sha256_mismatch,
    sha256_sidecar,
    sidecar_confirms,
    write_atomically,
)


def test_package_file_finds_a_file_without_importing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"linewise_files_test_{uuid.uuid4().hex[:8]}"
    package = tmp_path / name
    (package / "data").mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('must not be imported')\n")
    (package / "data" / "x.bin").write_bytes(b"x")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()

    assert package_dirs(name) == [package]
    assert package_file(name, "data/x.bin") == package / "data" / "x.bin"
    assert package_file(name, "data/missing.bin") is None
    assert name not in sys.modules
    assert package_dirs("no_such_package_" + uuid.uuid4().hex) == []
    assert package_file("no_such_package_" + uuid.uuid4().hex, "x") is None


def test_sha256_mismatch_writes_a_sidecar_and_reports_the_actual_hash(tmp_path: Path) -> None:
    path = tmp_path / "blob.bin"
    path.write_bytes(b"hello" * 1000)
    good = hashlib.sha256(path.read_bytes()).hexdigest()

    assert sha256_mismatch(path, "0" * 64) == good
    assert not sha256_sidecar(path).exists()
    assert sha256_mismatch(path, good) is None
    stat = path.stat()
    assert json.loads(sha256_sidecar(path).read_text()) == {
        "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": good,
    }  # fmt: skip
    assert sidecar_confirms(path, good)
    assert not sidecar_confirms(path, "0" * 64)


def test_a_changed_file_is_hashed_again(tmp_path: Path) -> None:
    path = tmp_path / "blob.bin"
    path.write_bytes(b"one")
    good = hashlib.sha256(b"one").hexdigest()
    assert sha256_mismatch(path, good) is None

    path.write_bytes(b"two!")  # another size: the sidecar no longer vouches for it
    assert not sidecar_confirms(path, good)
    assert sha256_mismatch(path, good) == hashlib.sha256(b"two!").hexdigest()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder_is_checked_once_per_process(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "blob.bin"
    path.write_bytes(b"data")
    good = hashlib.sha256(b"data").hexdigest()
    folder.chmod(0o555)
    try:
        assert sha256_mismatch(path, good) is None
        assert not sha256_sidecar(path).exists()
        path.chmod(0o000)  # unreadable now: a second check must not read it again
        assert sha256_mismatch(path, good) is None
    finally:
        path.chmod(0o644)
        folder.chmod(0o755)


def test_a_file_is_written_whole_with_its_mode_and_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_text("old")
    path.chmod(0o644)
    write_atomically(path, '{"k": 1}', mode=0o600)
    assert path.read_text() == '{"k": 1}'
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # not the old file's mode
    write_atomically(path, b"\xff raw", durable=True)
    assert path.read_bytes() == b"\xff raw"
    write_atomically(path, "caf\udce9", errors="surrogateescape")  # bytes read that way
    assert path.read_bytes() == b"caf\xe9"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "report.md"
    path.write_text("old report")
    with pytest.raises(UnicodeEncodeError):
        write_atomically(path, "lone surrogate \udce9")  # strict: cannot be UTF-8
    (tmp_path / "blocked").mkdir()
    with pytest.raises(OSError):  # a folder stands where the file would go
        write_atomically(tmp_path / "blocked", "text")
    assert path.read_text() == "old report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocked", "report.md"]
