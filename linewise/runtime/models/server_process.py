"""The embedded model's server process: llama.cpp's OpenAI-compatible server, in-process.

``LocalModelServer`` (``local_server``) runs this module as its child; it can also be run
by hand::

    python -m linewise.runtime.models.server_process serve --model PATH --port N --ctx N
    python -m linewise.runtime.models.server_process assemble   # build the cache, print its path

The server comes from the PyPI package ``xllamacpp``, imported only when serving, so
that the supervisor can import the constants here without loading llama.cpp.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from linewise.errors import ModelError
from linewise.runtime.models.files import ensure_embedded_model, resolve_model_path
from linewise.settings import DEFAULT_CONTEXT_TOKENS

EXIT_PORT_IN_USE = 98
"""The exit status when the port is taken (EADDRINUSE): the supervisor retries another."""


def default_threads() -> int:
    """CPUs this process may run on (affinity-aware ``os.cpu_count()``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


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
    # Flash attention keeps the compute buffer small at 32k context on CPU: without it
    # the attention scores of each micro-batch are materialised in full.
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
        prog="python -m linewise.runtime.models.server_process",
        description="Assemble or serve linewise's embedded local model.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve a GGUF file (OpenAI-compatible HTTP)")
    serve.add_argument("--model", help="GGUF file (default: the embedded model)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument("--ctx", type=int, default=DEFAULT_CONTEXT_TOKENS,
                       help="context size in tokens")
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
    """Entry point of ``python -m linewise.runtime.models.server_process``."""
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
