"""A BERT sentence encoder (all-MiniLM-L6-v2 by default) written in JAX, for training.

The forward pass is BERT's, as ``transformers.BertModel`` computes it, followed by what
sentence-transformers adds for this model:

- embeddings: word + absolute position + token type, then LayerNorm;
- ``num_hidden_layers`` post-LayerNorm blocks: multi-head self-attention whose padded
  keys get a large negative bias (so a padded batch gives each text the vector it gets
  alone), a residual and LayerNorm, then a feed-forward layer with exact (erf) GELU, a
  residual and LayerNorm; every LayerNorm uses the config's ``layer_norm_eps``;
- mean pooling of the last hidden states over the attention mask, then L2
  normalisation: the sentence vector is a unit vector, so a dot product is a cosine.

The pooler (``pooler.dense``) is not used by sentence-transformers and is not loaded.
Dropout runs only when a PRNG key is given (training); inference is deterministic.

Parameters are a flat ``dict[str, array]``: the embedding tables and their LayerNorm,
and the layers' weights *stacked* along a first axis of length ``num_hidden_layers``
(``layer.query_kernel`` is ``[L, hidden, hidden]``), so that one ``lax.scan`` runs the
layers and XLA compiles a single layer body. Kernels are stored ``[in, out]`` (the
transpose of PyTorch's ``Linear.weight``), ready for ``x @ kernel``; the ONNX export uses
the same layout.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from linewise.apps.retriever.base import base_model_dir, read_safetensors
from linewise.errors import ModelError

__all__ = [
    "MASK_BIAS",
    "EncoderConfig",
    "Params",
    "TextTokenizer",
    "embed_texts",
    "encode",
    "head_params",
    "load_base",
    "mean_pool",
    "mean_pool_normalise",
    "params_from_bert",
    "relevance",
    "token_states",
]

#: Parameters: name -> array (numpy when loaded or saved, jax inside a step).
Params = dict[str, Any]

#: Added to the attention scores of padded keys. Large enough that their softmax weight
#: is exactly zero in float32, small enough that adding it to a score never overflows.
MASK_BIAS = -1e9

#: Per-layer tensors: our name -> (the BERT checkpoint's name under
#: ``encoder.layer.{i}.``, whether it is a ``Linear.weight`` to transpose).
_LAYER_TENSORS: dict[str, tuple[str, bool]] = {
    "query_kernel": ("attention.self.query.weight", True),
    "query_bias": ("attention.self.query.bias", False),
    "key_kernel": ("attention.self.key.weight", True),
    "key_bias": ("attention.self.key.bias", False),
    "value_kernel": ("attention.self.value.weight", True),
    "value_bias": ("attention.self.value.bias", False),
    "attn_out_kernel": ("attention.output.dense.weight", True),
    "attn_out_bias": ("attention.output.dense.bias", False),
    "attn_ln_scale": ("attention.output.LayerNorm.weight", False),
    "attn_ln_bias": ("attention.output.LayerNorm.bias", False),
    "ffn_in_kernel": ("intermediate.dense.weight", True),
    "ffn_in_bias": ("intermediate.dense.bias", False),
    "ffn_out_kernel": ("output.dense.weight", True),
    "ffn_out_bias": ("output.dense.bias", False),
    "ffn_ln_scale": ("output.LayerNorm.weight", False),
    "ffn_ln_bias": ("output.LayerNorm.bias", False),
}
_EMBEDDING_TENSORS = {
    "word_embeddings": "embeddings.word_embeddings.weight",
    "position_embeddings": "embeddings.position_embeddings.weight",
    "token_type_embeddings": "embeddings.token_type_embeddings.weight",
    "embeddings_ln_scale": "embeddings.LayerNorm.weight",
    "embeddings_ln_bias": "embeddings.LayerNorm.bias",
}
LAYER_NAMES = tuple(f"layer.{name}" for name in _LAYER_TENSORS)


@dataclass(frozen=True)
class EncoderConfig:
    """The shape of a BERT encoder, read from its ``config.json``."""

    vocab_size: int = 30522
    hidden_size: int = 384
    num_hidden_layers: int = 6
    num_attention_heads: int = 12
    intermediate_size: int = 1536
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_file(cls, path: Path) -> EncoderConfig:
        """The config of a Hugging Face ``config.json``; only absolute-position,
        erf-GELU BERT models are accepted, since that is the only forward pass here."""
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ModelError(f"Cannot read the encoder config {path}: {exc}") from exc
        if raw.get("hidden_act", "gelu") != "gelu" or raw.get(
            "position_embedding_type", "absolute"
        ) != "absolute":
            raise ModelError(
                f"{path}: only BERT with exact GELU and absolute positions is supported "
                f"(hidden_act={raw.get('hidden_act')!r}, "
                f"position_embedding_type={raw.get('position_embedding_type')!r})"
            )
        fields = {name: raw[name] for name in asdict(cls()) if name in raw}
        config = cls(**fields)
        if config.hidden_size % config.num_attention_heads:
            raise ModelError(f"{path}: hidden_size is not a multiple of num_attention_heads")
        return config

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def params_from_bert(tensors: Mapping[str, np.ndarray], config: EncoderConfig) -> Params:
    """Our float32 parameters from a BERT checkpoint's tensors (with or without the
    ``bert.`` prefix of a task model).

    Raises:
        ModelError: a tensor is missing or has an unexpected shape.
    """
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in tensors else ""

    def get(name: str) -> np.ndarray:
        try:
            return np.asarray(tensors[prefix + name], dtype=np.float32)
        except KeyError as exc:
            raise ModelError(f"The checkpoint has no tensor {prefix + name}") from exc

    params: Params = {ours: get(theirs) for ours, theirs in _EMBEDDING_TENSORS.items()}
    for ours, (theirs, transpose) in _LAYER_TENSORS.items():
        per_layer = []
        for index in range(config.num_hidden_layers):
            array = get(f"encoder.layer.{index}.{theirs}")
            per_layer.append(array.T if transpose else array)
        params[f"layer.{ours}"] = np.ascontiguousarray(np.stack(per_layer))
    expected = {
        "word_embeddings": (config.vocab_size, config.hidden_size),
        "position_embeddings": (config.max_position_embeddings, config.hidden_size),
        "token_type_embeddings": (config.type_vocab_size, config.hidden_size),
        "layer.query_kernel": (config.num_hidden_layers, config.hidden_size, config.hidden_size),
        "layer.ffn_in_kernel": (
            config.num_hidden_layers, config.hidden_size, config.intermediate_size
        ),
    }
    for name, shape in expected.items():
        if params[name].shape != shape:
            raise ModelError(f"Tensor {name} has shape {params[name].shape}, expected {shape}")
    return params


def load_base(folder: Path | str | None = None) -> tuple[EncoderConfig, Params, Path]:
    """The base model's config, float parameters and folder (see ``base.base_model_dir``)."""
    where = base_model_dir(folder)
    config = EncoderConfig.from_file(where / "config.json")
    params = params_from_bert(read_safetensors(where / "model.safetensors"), config)
    return config, params, where


class TextTokenizer:
    """The model's WordPiece tokenizer, padding every batch to one fixed length.

    A fixed length means a fixed array shape, so a jitted step compiles once per run
    rather than once per batch. Longer texts are truncated (``[SEP]`` kept last).
    """

    def __init__(self, tokenizer_json: Path) -> None:
        from tokenizers import Tokenizer

        self.path = tokenizer_json
        self._tokenizer = Tokenizer.from_file(str(tokenizer_json))
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()
        self._pair_tokenizer: Any = None
        self._pair_length = 0

    def lengths(self, texts: Sequence[str]) -> list[int]:
        """Token counts with ``[CLS]`` and ``[SEP]``, untruncated."""
        return [len(e.ids) for e in self._tokenizer.encode_batch(list(texts))]

    def __call__(
        self, texts: Sequence[str], length: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``input_ids``, ``attention_mask``, ``token_type_ids``: int32 ``[len(texts), length]``."""
        ids = np.zeros((len(texts), length), dtype=np.int32)
        mask = np.zeros((len(texts), length), dtype=np.int32)
        for row, encoding in enumerate(self._tokenizer.encode_batch(list(texts))):
            tokens = encoding.ids
            if len(tokens) > length:
                tokens = [*tokens[: length - 1], tokens[-1]]
            ids[row, : len(tokens)] = tokens
            mask[row, : len(tokens)] = 1
        return ids, mask, np.zeros_like(ids)

    def pairs(
        self, queries: Sequence[str], texts: Sequence[str], length: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``[CLS] query [SEP] text [SEP]`` with token types 0 then 1, each pair truncated
        longest-first to ``length`` tokens: exactly how ``tokenizers`` encodes a pair at
        inference (``linewise.agent.text.learned.TrainedReranker``)."""
        if self._pair_tokenizer is None or self._pair_length != length:
            from tokenizers import Tokenizer

            self._pair_tokenizer = Tokenizer.from_file(str(self.path))
            self._pair_tokenizer.no_padding()
            self._pair_tokenizer.enable_truncation(max_length=length)
            self._pair_length = length
        encodings = self._pair_tokenizer.encode_batch(list(zip(queries, texts, strict=True)))
        ids = np.zeros((len(encodings), length), dtype=np.int32)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, encoding in enumerate(encodings):
            size = len(encoding.ids)
            ids[row, :size] = encoding.ids
            mask[row, :size] = 1
            types[row, :size] = encoding.type_ids
        return ids, mask, types


def _layer_norm(x: jax.Array, scale: jax.Array, bias: jax.Array, eps: float) -> jax.Array:
    mean = jnp.mean(x, axis=-1, keepdims=True)
    variance = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(variance + eps) * scale + bias


def _dropout(x: jax.Array, rate: float, key: jax.Array | None) -> jax.Array:
    if key is None or rate <= 0.0:
        return x
    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), 0.0)


def token_states(
    params: Params,
    config: EncoderConfig,
    input_ids: jax.Array,
    attention_mask: jax.Array,
    token_type_ids: jax.Array | None = None,
    *,
    dropout: float = 0.0,
    key: jax.Array | None = None,
) -> jax.Array:
    """The last hidden states ``[batch, seq, hidden]`` (dropout only with a ``key``)."""
    batch, seq = input_ids.shape
    if token_type_ids is None:
        token_type_ids = jnp.zeros_like(input_ids)
    hidden = (
        jnp.take(params["word_embeddings"], input_ids, axis=0)
        + params["position_embeddings"][None, :seq]
        + jnp.take(params["token_type_embeddings"], token_type_ids, axis=0)
    )
    eps = config.layer_norm_eps
    hidden = _layer_norm(hidden, params["embeddings_ln_scale"], params["embeddings_ln_bias"], eps)
    bias = (1.0 - attention_mask.astype(hidden.dtype))[:, None, None, :] * MASK_BIAS
    heads, size = config.num_attention_heads, config.head_size

    def split_heads(x: jax.Array) -> jax.Array:  # [B, S, H] -> [B, heads, S, size]
        return x.reshape(batch, seq, heads, size).transpose(0, 2, 1, 3)

    def layer(x: jax.Array, step: tuple[Params, jax.Array | None]) -> tuple[jax.Array, None]:
        weights, layer_key = step
        drop = (
            jax.random.split(layer_key, 3) if layer_key is not None else (None, None, None)
        )
        query = split_heads(x @ weights["query_kernel"] + weights["query_bias"])
        key_ = split_heads(x @ weights["key_kernel"] + weights["key_bias"])
        value = split_heads(x @ weights["value_kernel"] + weights["value_bias"])
        scores = query @ key_.transpose(0, 1, 3, 2) / np.float32(np.sqrt(size)) + bias
        probs = _dropout(jax.nn.softmax(scores, axis=-1), dropout, drop[0])
        context = (probs @ value).transpose(0, 2, 1, 3).reshape(batch, seq, heads * size)
        attended = _dropout(context @ weights["attn_out_kernel"] + weights["attn_out_bias"],
                            dropout, drop[1])
        x = _layer_norm(attended + x, weights["attn_ln_scale"], weights["attn_ln_bias"], eps)
        inner = jax.nn.gelu(x @ weights["ffn_in_kernel"] + weights["ffn_in_bias"],
                            approximate=False)
        out = _dropout(inner @ weights["ffn_out_kernel"] + weights["ffn_out_bias"],
                       dropout, drop[2])
        return _layer_norm(out + x, weights["ffn_ln_scale"], weights["ffn_ln_bias"], eps), None

    stacked = {name.removeprefix("layer."): params[name] for name in LAYER_NAMES}
    if key is None:
        result, _ = jax.lax.scan(lambda x, w: layer(x, (w, None)), hidden, stacked)
    else:
        keys = jax.random.split(key, config.num_hidden_layers + 1)
        hidden = _dropout(hidden, dropout, keys[0])
        result, _ = jax.lax.scan(layer, hidden, (stacked, keys[1:]))
    output: jax.Array = result
    return output


def mean_pool(hidden: jax.Array, attention_mask: jax.Array) -> jax.Array:
    """Mean of the unmasked token states ``[batch, hidden]``."""
    weights = attention_mask.astype(hidden.dtype)[..., None]
    pooled: jax.Array = (jnp.sum(hidden * weights, axis=1)
                         / jnp.maximum(jnp.sum(weights, axis=1), 1e-9))
    return pooled


def mean_pool_normalise(hidden: jax.Array, attention_mask: jax.Array) -> jax.Array:
    """Mean of the unmasked token states, scaled to unit length."""
    pooled = mean_pool(hidden, attention_mask)
    norms = jnp.linalg.norm(pooled, axis=-1, keepdims=True)
    return pooled / jnp.maximum(norms, 1e-12)


def encode(
    params: Params,
    config: EncoderConfig,
    input_ids: jax.Array,
    attention_mask: jax.Array,
    token_type_ids: jax.Array | None = None,
    *,
    dropout: float = 0.0,
    key: jax.Array | None = None,
) -> jax.Array:
    """Unit sentence vectors ``[batch, hidden]``: mean pooling over the mask, then L2."""
    hidden = token_states(params, config, input_ids, attention_mask, token_type_ids,
                          dropout=dropout, key=key)
    return mean_pool_normalise(hidden, attention_mask)


def head_params(config: EncoderConfig, seed: int = 0) -> Params:
    """A new relevance head for a reranker: a linear layer from the mean-pooled state
    to one score, with BERT's initialisation (normal, standard deviation 0.02; bias 0).

    Mean pooling rather than ``[CLS]``: the base model was trained to put a text's
    meaning in the mean of its token states, so the head starts from a representation
    that already means something.
    """
    rng = np.random.default_rng(seed)
    return {"head_kernel": rng.normal(0.0, 0.02, (config.hidden_size, 1)).astype(np.float32),
            "head_bias": np.zeros((1,), dtype=np.float32)}


def relevance(
    params: Params,
    config: EncoderConfig,
    input_ids: jax.Array,
    attention_mask: jax.Array,
    token_type_ids: jax.Array | None = None,
    *,
    dropout: float = 0.0,
    key: jax.Array | None = None,
) -> jax.Array:
    """One relevance score per ``[CLS] query [SEP] text [SEP]`` row, ``[batch]``: the
    mean of the last states over the mask, through the linear head (:func:`head_params`)."""
    hidden = token_states(params, config, input_ids, attention_mask, token_type_ids,
                          dropout=dropout, key=key)
    pooled = mean_pool(hidden, attention_mask)
    scores: jax.Array = (pooled @ params["head_kernel"])[:, 0] + params["head_bias"][0]
    return scores


#: Level 1 of XLA's backend optimisation compiles in about half the time of the default
#: with no loss of speed here (measured on the training step).
_encode_jit = jax.jit(encode, static_argnums=(1,),
                      compiler_options={"xla_backend_optimization_level": 1})


def embed_texts(
    params: Params,
    config: EncoderConfig,
    tokenizer: TextTokenizer,
    texts: Sequence[str],
    *,
    max_length: int = 256,
    batch_size: int = 64,
) -> np.ndarray:
    """Unit float32 vectors of ``texts``, ``batch_size`` at a time.

    Each batch is padded to its longest text rounded up to a multiple of 8 tokens, and
    to a power-of-two number of rows: few distinct shapes, so few compilations.
    """
    out = np.zeros((len(texts), config.hidden_size), dtype=np.float32)
    lengths = tokenizer.lengths(texts)
    for start in range(0, len(texts), batch_size):
        chunk = list(texts[start : start + batch_size])
        longest = max(lengths[start : start + batch_size], default=2)
        length = min(max_length, -(-longest // 8) * 8)
        rows = min(batch_size, 1 << (len(chunk) - 1).bit_length())
        ids, mask, types = tokenizer(chunk + [""] * (rows - len(chunk)), length)
        vectors = _encode_jit(params, config, ids, mask, types)
        out[start : start + len(chunk)] = np.asarray(vectors)[: len(chunk)]
    return out
