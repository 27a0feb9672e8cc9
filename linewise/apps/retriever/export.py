"""Writing a trained encoder as a weights folder: int8 ONNX, tokenizer, manifest.

The ONNX graph is built node by node with ``onnx.helper`` from the float parameters
(no PyTorch, no tracing), mirroring ``encoder.token_states`` operation for operation:
the same embeddings sum, LayerNormalization with the config's epsilon, the same padding
bias (``encoder.MASK_BIAS``) on the attention scores, exact (erf) GELU, then mean
pooling over the mask and L2 normalisation *inside the graph*. Its one output is
``sentence_embedding`` (float32 ``[batch, hidden]``, unit rows): a caller feeds token
ids and gets the vectors, with no pooling code to keep in step with training. A
reranker's parameters carry a head (``encoder.head_params``): its graph pools the same
way without the normalisation, applies the head, and its one output is ``relevance``
(float32 ``[batch]``, one score per ``[CLS] query [SEP] unit [SEP]`` row).

Inputs are ``input_ids``, ``attention_mask`` and ``token_type_ids``, int64
``[batch, seq]``, as the shipped all-MiniLM-L6-v2 export. Opset 17 (the first with
``LayerNormalization``) and IR version 8, which onnxruntime has read since 1.14.

The float model is then quantised with ``onnxruntime.quantization.quantize_dynamic``
(int8 weights, one scale per output channel, for every MatMul with a constant weight
and for the embedding Gathers; activations quantised at run time), which brings
all-MiniLM-L6-v2 from 90 MB to about 23.4 MB. The folder layout and the manifest are read by
``linewise.agent.text.learned.TrainedEmbedder``, whose constants are used here.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from linewise.agent.text.learned import (
    EMBEDDER_KIND,
    MANIFEST_FORMAT,
    MANIFEST_NAME,
    MANIFEST_VERSION,
    MODEL_NAME,
    OUTPUT_NAME,
    RERANKER_KIND,
    RERANKER_OUTPUT,
    TOKENIZER_NAME,
)
from linewise.apps.retriever.base import BASE_FILES, BASE_MODEL, BASE_REQUIREMENT
from linewise.errors import ConfigError
from linewise.files import sha256_file

if TYPE_CHECKING:  # importing them at run time would import JAX
    from linewise.apps.retriever.encoder import EncoderConfig, Params
    from linewise.apps.retriever.train import TrainResult

__all__ = ["build_onnx", "export_folder", "export_trained"]

OPSET = 17
IR_VERSION = 8
MASK_BIAS = -1e9  # encoder.MASK_BIAS, repeated so that this module does not import JAX


class _Graph:
    """A small builder: named nodes, constants and initializers."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._count = 0

    def weight(self, name: str, array: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def const(self, value: Any, dtype: Any = np.float32) -> str:
        self._count += 1
        return self.weight(f"const_{self._count}", np.asarray(value, dtype=dtype))

    def op(self, op_type: str, *inputs: str, **attributes: Any) -> str:
        self._count += 1
        output = f"{op_type.lower()}_{self._count}"
        self.nodes.append(
            helper.make_node(op_type, list(inputs), [output], name=f"n{self._count}",
                             **attributes)
        )
        return output


def build_onnx(params: Params, config: EncoderConfig) -> onnx.ModelProto:
    """The float32 ONNX encoder for these parameters (see the module's docstring)."""
    g = _Graph()
    p = {name: np.asarray(value, dtype=np.float32) for name, value in params.items()}
    eps = float(config.layer_norm_eps)
    heads, size, hidden = config.num_attention_heads, config.head_size, config.hidden_size

    def layer_norm(x: str, scale: str, bias: str) -> str:
        return g.op("LayerNormalization", x, scale, bias, axis=-1, epsilon=eps)

    def dense(x: str, kernel: str, bias: str) -> str:
        return g.op("Add", g.op("MatMul", x, kernel), bias)

    words = g.op("Gather", g.weight("word_embeddings", p["word_embeddings"]), "input_ids")
    # The first ``seq`` rows of the position table, as a Slice whose bounds are 1-D.
    seq = g.op("Shape", "input_ids", start=1, end=2)
    zero = g.const([0], np.int64)
    placed = g.op("Slice", g.weight("position_embeddings", p["position_embeddings"]),
                  zero, seq, zero)
    types = g.op("Gather", g.weight("token_type_embeddings", p["token_type_embeddings"]),
                 "token_type_ids")
    hidden_state = layer_norm(
        g.op("Add", g.op("Add", words, placed), types),
        g.weight("embeddings_ln_scale", p["embeddings_ln_scale"]),
        g.weight("embeddings_ln_bias", p["embeddings_ln_bias"]),
    )
    mask = g.op("Cast", "attention_mask", to=TensorProto.FLOAT)
    bias = g.op("Unsqueeze", g.op("Mul", g.op("Sub", g.const(1.0), mask), g.const(MASK_BIAS)),
                g.const([1, 2], np.int64))
    split_shape = g.const([0, 0, heads, size], np.int64)
    merge_shape = g.const([0, 0, hidden], np.int64)
    scale = g.const(np.sqrt(size))
    half, one, root2 = g.const(0.5), g.const(1.0), g.const(np.sqrt(2.0))
    for i in range(config.num_hidden_layers):
        def w(name: str, index: int = i) -> str:
            return g.weight(f"layer{index}.{name}", p[f"layer.{name}"][index])

        x = hidden_state
        query = g.op("Transpose", g.op("Reshape", dense(x, w("query_kernel"), w("query_bias")),
                                       split_shape), perm=[0, 2, 1, 3])
        key = g.op("Transpose", g.op("Reshape", dense(x, w("key_kernel"), w("key_bias")),
                                     split_shape), perm=[0, 2, 3, 1])
        value = g.op("Transpose", g.op("Reshape", dense(x, w("value_kernel"), w("value_bias")),
                                       split_shape), perm=[0, 2, 1, 3])
        scores = g.op("Add", g.op("Div", g.op("MatMul", query, key), scale), bias)
        probs = g.op("Softmax", scores, axis=-1)
        context = g.op("Reshape", g.op("Transpose", g.op("MatMul", probs, value),
                                       perm=[0, 2, 1, 3]), merge_shape)
        attended = dense(context, w("attn_out_kernel"), w("attn_out_bias"))
        x = layer_norm(g.op("Add", attended, x), w("attn_ln_scale"), w("attn_ln_bias"))
        inner = dense(x, w("ffn_in_kernel"), w("ffn_in_bias"))
        gelu = g.op("Mul", g.op("Mul", inner, half),
                    g.op("Add", one, g.op("Erf", g.op("Div", inner, root2))))
        out = dense(gelu, w("ffn_out_kernel"), w("ffn_out_bias"))
        hidden_state = layer_norm(g.op("Add", out, x), w("ffn_ln_scale"), w("ffn_ln_bias"))

    weights = g.op("Unsqueeze", mask, g.const([2], np.int64))
    axis1 = g.const([1], np.int64)
    summed = g.op("ReduceSum", g.op("Mul", hidden_state, weights), axis1, keepdims=0)
    counts = g.op("Max", g.op("ReduceSum", weights, axis1, keepdims=0), g.const(1e-9))
    pooled = g.op("Div", summed, counts)
    if "head_kernel" in p:
        output = RERANKER_OUTPUT
        output_shape: list[str | int] = ["batch"]
        scored = dense(pooled, g.weight("head_kernel", p["head_kernel"]),
                       g.weight("head_bias", p["head_bias"]))
        g.nodes.append(helper.make_node("Reshape", [scored, g.const([-1], np.int64)],
                                        [output], name="output"))
    else:
        output = OUTPUT_NAME
        output_shape = ["batch", hidden]
        norms = g.op("Sqrt", g.op("ReduceSum", g.op("Mul", pooled, pooled), axis1,
                                  keepdims=1))
        g.nodes.append(helper.make_node(
            "Div", [pooled, g.op("Max", norms, g.const(1e-12))], [output], name="output"
        ))

    def int_input(name: str) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])

    graph = helper.make_graph(
        g.nodes,
        "linewise_retriever_encoder",
        [int_input("input_ids"), int_input("attention_mask"), int_input("token_type_ids")],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, output_shape)],
        initializer=g.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="linewise")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model


def _quantise(float_path: Path, int8_path: Path) -> None:
    """int8 dynamic quantisation of every constant-weight MatMul and the word Gather.

    Per-channel scales: with one scale per tensor, all-MiniLM-L6-v2's sentence vectors
    kept a cosine of only 0.91-0.97 with the float model's on short AXTree lines; with
    one per output column, 0.99 and more. 7-bit weights (``reduce_range``): CPUs with
    AVX2 but no VNNI saturate u8×s8 products of full-range weights, and on this (VNNI)
    machine the 7 bits cost under 0.001 of mean cosine.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # It logs a warning on the root logger about optional pre-processing on every call.
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        quantize_dynamic(float_path, int8_path, weight_type=QuantType.QInt8,
                         per_channel=True, reduce_range=True,
                         extra_options={"MatMulConstBOnly": True})
    finally:
        root.setLevel(level)


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _plain(value: Any) -> Any:
    """``value`` with numpy scalars as Python numbers and NaN or infinity as ``None``:
    the manifest stays strict JSON."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def _prepare(out: Path) -> None:
    """Refuse to replace a folder that holds anything but an earlier export."""
    if out.exists() and (not out.is_dir() or (
        any(out.iterdir()) and not (out / MANIFEST_NAME).is_file()
    )):
        raise ConfigError(
            f"{out} exists and is not a retriever weights folder; choose an empty or new "
            "folder"
        )


def export_folder(
    params: Params,
    config: EncoderConfig,
    out: Path | str,
    *,
    tokenizer: Path,
    max_length: int,
    sources: Sequence[str] = (),
    command: str = "",
    seed: int | None = None,
    metrics: dict[str, Any] | None = None,
    float_onnx: Path | str | None = None,
) -> dict[str, Any]:
    """Write the weights folder ``out`` and return its manifest.

    The folder is built beside ``out`` and renamed into place, so a failed export
    leaves the earlier folder (if any) as it was. ``float_onnx``, when given, keeps the
    float model there (outside the folder: it is four times the size).

    Raises:
        ConfigError: ``out`` exists and is not a weights folder.
    """
    out = Path(out)
    _prepare(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    model = build_onnx(params, config)
    kind = RERANKER_KIND if "head_kernel" in params else EMBEDDER_KIND
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}.") as tmp:
        work = Path(tmp)
        folder = work / "folder"
        folder.mkdir()
        float_path = work / "float.onnx"
        onnx.save_model(model, float_path)
        _quantise(float_path, folder / MODEL_NAME)
        shutil.copyfile(tokenizer, folder / TOKENIZER_NAME)
        files = {
            name: {"sha256": sha256_file(folder / name), "size": (folder / name).stat().st_size}
            for name in (MODEL_NAME, TOKENIZER_NAME)
        }
        manifest: dict[str, Any] = {
            "format": MANIFEST_FORMAT,
            "version": MANIFEST_VERSION,
            "model": MODEL_NAME,
            "tokenizer": TOKENIZER_NAME,
            "inputs": ["input_ids", "attention_mask", "token_type_ids"],
            "kind": kind,
            "output": RERANKER_OUTPUT if kind == RERANKER_KIND else OUTPUT_NAME,
            "pooling": ("mean over attention_mask, then a linear head (in the graph)"
                        if kind == RERANKER_KIND else
                        "mean over attention_mask, then L2 normalisation (in the graph)"),
            "quantization": "int8 dynamic (onnxruntime quantize_dynamic: QInt8 weights, "
                            "per channel, reduce_range)",
            "dimension": 1 if kind == RERANKER_KIND else config.hidden_size,
            "max_length": max_length,
            "base_model": {
                "name": BASE_MODEL,
                "package": BASE_REQUIREMENT,
                "sha256": BASE_FILES["model.safetensors"],
            },
            "encoder_config": config.to_dict(),
            "sources": list(sources),
            "command": command,
            "seed": seed,
            "metrics": _plain(metrics or {}),
            "versions": {name: _version(name)
                         for name in ("linewise", "jax", "onnx", "onnxruntime")},
            "files": files,
            "size": sum(entry["size"] for entry in files.values()),
        }
        (folder / MANIFEST_NAME).write_text(
            json.dumps(manifest, indent=2, sort_keys=True, allow_nan=False) + "\n",
            encoding="utf-8",
        )
        if float_onnx is not None:
            Path(float_onnx).parent.mkdir(parents=True, exist_ok=True)
            shutil.move(float_path, float_onnx)
        if out.exists():
            old = work / "old"
            os.replace(out, old)
        os.replace(folder, out)
    return manifest


def export_trained(
    result: TrainResult,
    out: Path | str,
    *,
    command: str = "",
    sources: Sequence[str] | None = None,
    float_onnx: Path | str | None = None,
) -> dict[str, Any]:
    """:func:`export_folder` for a training result: its parameters, tokenizer, seed and
    metrics. ``sources`` should name what was trained on (dataset folders, runs); by
    default it is the examples' own ``source`` fields, at most 20 of them."""
    metrics = dict(result.metrics)
    return export_folder(
        result.params,
        result.config,
        out,
        tokenizer=result.tokenizer_path,
        max_length=result.options.max_length,
        sources=list(sources) if sources is not None else metrics.get("sources", []),
        command=command,
        seed=result.options.seed,
        metrics=metrics,
        float_onnx=float_onnx,
    )
