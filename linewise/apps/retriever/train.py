"""Contrastive fine-tuning of the encoder as a bi-encoder, on the CPU with JAX.

Examples are :class:`linewise.apps.retriever.examples.Example`: a goal (or a question
about a page), the unit text that answers it (a line with its context), and optionally
units that look relevant but are not (hard negatives).

The loss is sentence-transformers' *multiple negatives ranking* loss: each query is
scored (cosine × ``scale``, 20 as there) against every document of the batch — its own
positive, the other examples' positives and every hard negative given — and the
cross-entropy of picking its own positive is minimised. Rules and reasons:

- A column whose text is the row's own positive (two queries for one line, a line that
  is another example's negative) is masked out for that row: it is not a negative, and
  counting it would teach the model to push a line away from its own query.
- Batches have few shapes, since the jitted step compiles once per shape (about 8
  CPU-seconds for MiniLM): always ``batch_size`` rows and ``negatives_per_example``
  hard negatives per row (a short last batch and a row with fewer negatives are padded
  with masked rows and columns), and queries and documents each padded to the first
  of :data:`LENGTH_BUCKETS` that holds the batch's longest (capped at ``max_length``).
  One long line thus lengthens its batch only, not the whole run.
- AdamW as Hugging Face's (decoupled weight decay, none on biases and LayerNorm), with
  the global gradient norm clipped first, and a learning rate warmed up linearly over
  ``warmup_ratio`` of the steps then decayed linearly to zero. The step counter starts
  at one, so that the first step already moves (Hugging Face's starts at a rate of 0).
- Deterministic: the seed fixes the shuffles, the negatives drawn and the dropout; on
  the same machine and versions the same data and seed give the same losses.

``kind="reranker"`` trains a cross-encoder instead: the query and a unit are read
together (``[CLS] query [SEP] unit [SEP]``) and a linear head on the mean state scores
them (``encoder.relevance``). A bi-encoder must put a unit's meaning in one vector before
it sees the query, so a query that shares no word with its unit is matched only as well
as the two vectors happen to agree; a cross-encoder attends from each query word to each
unit word. It costs one pass per (query, unit), so it reranks the bi-encoder's best
units rather than reading a whole page. Its loss is listwise: each query's positive
against its hard negatives and ``in_batch_negatives`` other rows' positives, the
cross-entropy of the positive (a group of fixed size, padded slots masked).
"""

from __future__ import annotations

import math
import os
import resource
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
import structlog

from linewise.apps.retriever.encoder import (
    EncoderConfig,
    Params,
    TextTokenizer,
    embed_texts,
    encode,
    head_params,
    load_base,
    relevance,
)
from linewise.apps.retriever.examples import Example, read_examples
from linewise.errors import ConfigError

log = structlog.get_logger(__name__)

__all__ = ["KINDS", "TrainOptions", "TrainResult", "evaluate", "score_pairs", "train"]

Kind = Literal["bi-encoder", "reranker"]
KINDS: tuple[Kind, ...] = ("bi-encoder", "reranker")


@dataclass(frozen=True)
class TrainOptions:
    """How to train. ``max_steps`` stops early (tests, smoke runs); ``threads`` limits the
    XLA CPU thread pool (0: one per core), which only works before JAX first computes in
    this process."""

    epochs: int = 1
    batch_size: int = 32
    lr: float = 2e-5
    max_length: int = 128
    seed: int = 0
    threads: int = 0
    negatives_per_example: int = 1
    scale: float = 20.0
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    dropout: float = 0.1
    max_steps: int | None = None
    kind: Kind = "bi-encoder"
    in_batch_negatives: int = 2
    """Reranker only: other rows' positives added to each query's group."""

    def check(self) -> None:
        """Raise ``ConfigError`` for values that cannot train."""
        if self.kind not in KINDS:
            raise ConfigError(f"Unknown retriever kind {self.kind!r}; one of {', '.join(KINDS)}")
        if self.in_batch_negatives < 0 or (
            self.kind == "reranker"
            and self.negatives_per_example + self.in_batch_negatives < 1
        ):
            raise ConfigError("A reranker needs at least one negative per query "
                              "(hard or in-batch)")
        if self.epochs < 1 or self.batch_size < 2 or self.lr <= 0:
            raise ConfigError("Training needs epochs >= 1, batch_size >= 2 and lr > 0")
        if not 8 <= self.max_length <= 512 or self.negatives_per_example < 0:
            raise ConfigError("Training needs 8 <= max_length <= 512, negatives_per_example >= 0")
        if not 0 <= self.warmup_ratio < 1 or not 0 <= self.dropout < 1 or self.threads < 0:
            raise ConfigError(
                "Training needs 0 <= warmup_ratio < 1, 0 <= dropout < 1, threads >= 0"
            )
        if self.max_steps is not None and self.max_steps < 1:
            raise ConfigError("max_steps must be at least 1")


@dataclass
class TrainResult:
    """The trained float parameters (numpy), what they are, and how training went."""

    params: Params
    config: EncoderConfig
    tokenizer_path: Path
    base_dir: Path
    options: TrainOptions
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _Hyper:
    """The static part of a step: changing any of it recompiles."""

    config: EncoderConfig
    scale: float
    dropout: float
    weight_decay: float
    max_grad_norm: float
    kind: Kind = "bi-encoder"
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-6


def _decays(name: str) -> bool:
    """Hugging Face's rule: no weight decay on biases and LayerNorm parameters."""
    return not (name.endswith("_bias") or "_ln_" in name)


def _loss(
    params: Params, hyper: _Hyper, batch: dict[str, jax.Array], key: jax.Array
) -> jax.Array:
    if hyper.kind == "reranker":
        return _rerank_loss(params, hyper, batch, key)
    query_key, doc_key = jax.random.split(key)
    queries = encode(params, hyper.config, batch["q_ids"], batch["q_mask"],
                     dropout=hyper.dropout, key=query_key)
    docs = encode(params, hyper.config, batch["d_ids"], batch["d_mask"],
                  dropout=hyper.dropout, key=doc_key)
    scores = hyper.scale * queries @ docs.T
    scores = jnp.where(batch["allowed"], scores, -1e9)
    log_probs = jax.nn.log_softmax(scores, axis=-1)
    rows = jnp.arange(queries.shape[0])
    losses = -log_probs[rows, rows] * batch["row_valid"]
    return jnp.sum(losses) / jnp.maximum(jnp.sum(batch["row_valid"]), 1.0)


def _rerank_loss(
    params: Params, hyper: _Hyper, batch: dict[str, jax.Array], key: jax.Array
) -> jax.Array:
    scores = relevance(params, hyper.config, batch["ids"], batch["mask"], batch["types"],
                       dropout=hyper.dropout, key=key).reshape(batch["valid"].shape)
    scores = jnp.where(batch["valid"], scores, -1e9)
    losses = -jax.nn.log_softmax(scores, axis=-1)[:, 0] * batch["row_valid"]
    return jnp.sum(losses) / jnp.maximum(jnp.sum(batch["row_valid"]), 1.0)


def _step(
    params: Params,
    state: dict[str, Any],
    batch: dict[str, jax.Array],
    lr: jax.Array,
    key: jax.Array,
    hyper: _Hyper,
) -> tuple[Params, dict[str, Any], jax.Array, jax.Array]:
    """One AdamW step on clipped gradients: new params and state, the loss, the norm."""
    loss, grads = jax.value_and_grad(_loss)(params, hyper, batch, key)
    norm = jnp.sqrt(sum(jnp.sum(jnp.square(g)) for g in jax.tree_util.tree_leaves(grads)))
    clip = jnp.minimum(1.0, hyper.max_grad_norm / jnp.maximum(norm, 1e-12))
    count = state["count"] + 1
    correct1 = 1.0 - hyper.beta1 ** count.astype(jnp.float32)
    correct2 = 1.0 - hyper.beta2 ** count.astype(jnp.float32)
    new_params, new_m, new_v = {}, {}, {}
    for name, value in params.items():
        grad = grads[name] * clip
        m = hyper.beta1 * state["m"][name] + (1.0 - hyper.beta1) * grad
        v = hyper.beta2 * state["v"][name] + (1.0 - hyper.beta2) * jnp.square(grad)
        update = (m / correct1) / (jnp.sqrt(v / correct2) + hyper.eps)
        if _decays(name) and hyper.weight_decay:
            update = update + hyper.weight_decay * value
        new_params[name] = value - lr * update
        new_m[name], new_v[name] = m, v
    return new_params, {"count": count, "m": new_m, "v": new_v}, loss, norm


#: XLA's backend optimisation level 1 of 3 halves the step's compile time on the CPU
#: (8 CPU-seconds instead of 14) for the same speed per step.
COMPILER_OPTIONS = {"xla_backend_optimization_level": 1}

_jitted_step = jax.jit(_step, static_argnames=("hyper",), donate_argnums=(0, 1),
                       compiler_options=COMPILER_OPTIONS)


def _learning_rate(step: int, total: int, warmup: int, peak: float) -> float:
    """Linear warmup over ``warmup`` steps then linear decay to zero at ``total``;
    ``step`` counts from 1."""
    if step <= warmup:
        return peak * step / max(1, warmup)
    return peak * max(0.0, (total - step + 1) / max(1, total - warmup))


def _limit_threads(threads: int) -> None:
    """Size XLA's CPU thread pool before JAX's backend starts (``NPROC`` is what its
    pool reads); once started, the pool keeps its size."""
    if threads <= 0:
        return
    before = os.environ.get("NPROC")
    os.environ["NPROC"] = str(threads)
    try:
        jax.devices("cpu")
    finally:
        if before is None:
            os.environ.pop("NPROC", None)
        else:
            os.environ["NPROC"] = before


#: The padded lengths a batch may have (then ``max_length``).
LENGTH_BUCKETS = (16, 32, 48, 64, 96, 128, 192, 256, 384, 512)


def _bucket(longest: int, max_length: int) -> int:
    """The padded length for a batch whose longest text has ``longest`` tokens."""
    return min(max_length, next((b for b in LENGTH_BUCKETS if b >= longest), max_length))


def _batches(
    examples: Sequence[Example], options: TrainOptions, rng: np.random.Generator
) -> list[list[tuple[Example, list[str]]]]:
    """One epoch: shuffled examples in batches, each with its drawn hard negatives."""
    order = rng.permutation(len(examples))
    drawn = []
    for index in order:
        example = examples[int(index)]
        negatives = list(example.negatives)
        if len(negatives) > options.negatives_per_example:
            picks = rng.choice(len(negatives), options.negatives_per_example, replace=False)
            negatives = [negatives[int(i)] for i in sorted(picks)]
        drawn.append((example, negatives))
    size = options.batch_size
    return [drawn[start : start + size] for start in range(0, len(drawn), size)]


def _arrays(
    batch: list[tuple[Example, list[str]]],
    options: TrainOptions,
    tokenizer: TextTokenizer,
    lengths: dict[str, int],
) -> dict[str, np.ndarray]:
    """The padded arrays of one batch (see the module's rules on masking)."""
    rows, per = options.batch_size, options.negatives_per_example
    queries = [example.query for example, _ in batch] + [""] * (rows - len(batch))
    positives = [example.positive for example, _ in batch] + [""] * (rows - len(batch))
    docs: list[str] = list(positives)
    doc_valid = [i < len(batch) for i in range(rows)]
    for i in range(rows):
        negatives = batch[i][1] if i < len(batch) else []
        for k in range(per):
            docs.append(negatives[k] if k < len(negatives) else "")
            doc_valid.append(k < len(negatives))
    allowed = np.zeros((rows, len(docs)), dtype=bool)
    for i in range(min(rows, len(batch))):
        for j, text in enumerate(docs):
            allowed[i, j] = doc_valid[j] and (j == i or text != positives[i])
    query_length = _bucket(max(lengths.get(text, 2) for text in queries), options.max_length)
    doc_length = _bucket(max(lengths.get(text, 2) for text in docs), options.max_length)
    q_ids, q_mask, _ = tokenizer(queries, query_length)
    d_ids, d_mask, _ = tokenizer(docs, doc_length)
    row_valid = np.array([i < len(batch) for i in range(rows)], dtype=np.float32)
    return {"q_ids": q_ids, "q_mask": q_mask, "d_ids": d_ids, "d_mask": d_mask,
            "allowed": allowed, "row_valid": row_valid}


def _rerank_arrays(
    batch: list[tuple[Example, list[str]]],
    options: TrainOptions,
    tokenizer: TextTokenizer,
    lengths: dict[str, int],
) -> dict[str, np.ndarray]:
    """The padded pairs of one reranker batch: ``batch_size`` groups of one positive (slot
    0), ``negatives_per_example`` hard negatives, then ``in_batch_negatives`` positives of
    the rows after it (never a text equal to the row's own positive); empty slots are
    masked out."""
    rows, per, others = options.batch_size, options.negatives_per_example, \
        options.in_batch_negatives
    group = 1 + per + others
    positives = [example.positive for example, _ in batch]
    queries: list[str] = []
    docs: list[str] = []
    valid = np.zeros((rows, group), dtype=bool)
    for i in range(rows):
        slots = [""] * group
        query = ""
        if i < len(batch):
            example, negatives = batch[i]
            query = example.query
            slots[0] = example.positive
            valid[i, 0] = True
            hard = [n for n in negatives if n != example.positive][:per]
            for k, text in enumerate(hard):
                slots[1 + k], valid[i, 1 + k] = text, True
            shifted = [positives[(i + k) % len(batch)] for k in range(1, len(batch))]
            taken = [t for t in dict.fromkeys(shifted) if t != example.positive][:others]
            for k, text in enumerate(taken):
                slots[1 + per + k], valid[i, 1 + per + k] = text, True
        queries += [query] * group
        docs += slots
    longest = max((lengths.get(q, 2) + lengths.get(d, 2) - 1
                   for q, d, ok in zip(queries, docs, valid.ravel(), strict=True) if ok),
                  default=3)
    ids, mask, types = tokenizer.pairs(queries, docs, _bucket(longest, options.max_length))
    row_valid = np.array([i < len(batch) for i in range(rows)], dtype=np.float32)
    return {"ids": ids, "mask": mask, "types": types, "valid": valid,
            "row_valid": row_valid}


_relevance_jit = jax.jit(relevance, static_argnums=(1,), compiler_options=COMPILER_OPTIONS)


def score_pairs(
    params: Params,
    config: EncoderConfig,
    tokenizer: TextTokenizer,
    queries: Sequence[str],
    texts: Sequence[str],
    *,
    max_length: int = 128,
    batch_size: int = 64,
) -> np.ndarray:
    """A reranker's float32 score of each (query, text) pair, ``batch_size`` at a time
    (rows padded to a power of two and lengths to a multiple of 16: few compilations)."""
    out = np.zeros((len(queries),), dtype=np.float32)
    for start in range(0, len(queries), batch_size):
        chunk_q = list(queries[start : start + batch_size])
        chunk_t = list(texts[start : start + batch_size])
        rows = min(batch_size, 1 << (len(chunk_q) - 1).bit_length())
        pad = rows - len(chunk_q)
        ids, mask, types = tokenizer.pairs(chunk_q + [""] * pad, chunk_t + [""] * pad,
                                           max_length)
        used = max(16, -(-int(mask.sum(axis=1).max()) // 16) * 16)
        scores = _relevance_jit(params, config, ids[:, :used], mask[:, :used],
                                types[:, :used])
        out[start : start + len(chunk_q)] = np.asarray(scores)[: len(chunk_q)]
    return out


def _figures(wins: int, pairs: int, reciprocal: float, top: float, count: int
             ) -> dict[str, float]:
    count = max(1, count)
    return {
        "pair_accuracy": wins / pairs if pairs else float("nan"),
        "mrr": reciprocal / count,
        "recall_at_1": top / count,
    }


def _evaluate_reranker(
    params: Params,
    config: EncoderConfig,
    tokenizer: TextTokenizer,
    examples: Sequence[Example],
    max_length: int,
) -> dict[str, float]:
    queries: list[str] = []
    texts: list[str] = []
    for example in examples:
        for text in (example.positive, *example.negatives):
            queries.append(example.query)
            texts.append(text)
    scores = score_pairs(params, config, tokenizer, queries, texts, max_length=max_length)
    wins = pairs = 0
    reciprocal = top = 0.0
    at = 0
    for example in examples:
        own, rest = scores[at], scores[at + 1 : at + 1 + len(example.negatives)]
        at += 1 + len(example.negatives)
        pairs += len(rest)
        wins += int(np.sum(own > rest))
        rank = 1 + int(np.sum(rest > own))
        reciprocal += 1.0 / rank
        top += float(rank == 1)
    return _figures(wins, pairs, reciprocal, top, len(examples))


def evaluate(
    params: Params,
    config: EncoderConfig,
    tokenizer: TextTokenizer,
    examples: Sequence[Example],
    *,
    max_length: int = 128,
) -> dict[str, float]:
    """How well the encoder ranks each query's positive, over the examples given.

    - ``pair_accuracy``: the share of (positive, own hard negative) pairs where the
      positive scores higher (examples without negatives do not count);
    - ``mrr`` and ``recall_at_1``: the positive's rank among every distinct document of
      the set (all positives and negatives), other documents equal to it excluded; for
      a reranker (parameters with a head), among its own hard negatives only, since
      a reranker costs one pass per pair.
    """
    if "head_kernel" in params:
        return _evaluate_reranker(params, config, tokenizer, examples, max_length)
    docs = sorted({e.positive for e in examples} | {n for e in examples for n in e.negatives})
    position = {text: i for i, text in enumerate(docs)}
    query_vectors = embed_texts(params, config, tokenizer, [e.query for e in examples],
                                max_length=max_length)
    doc_vectors = embed_texts(params, config, tokenizer, docs, max_length=max_length)
    scores = query_vectors @ doc_vectors.T
    wins = pairs = 0
    reciprocal = top = 0.0
    for row, example in enumerate(examples):
        own = scores[row, position[example.positive]]
        for negative in example.negatives:
            pairs += 1
            wins += int(own > scores[row, position[negative]])
        rank = 1 + int(np.sum(scores[row] > own))
        reciprocal += 1.0 / rank
        top += float(rank == 1)
    return _figures(wins, pairs, reciprocal, top, len(examples))


#: Distinct example sources named in the metrics (a page URL each, in a large set):
#: beyond this many only their count is kept.
_SOURCES_KEPT = 20


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def train(
    examples: Path | str | Iterable[Example | dict[str, object]],
    options: TrainOptions | None = None,
    *,
    base: Path | str | None = None,
    eval_examples: Sequence[Example] | None = None,
    on_step: Callable[[int, float], None] | None = None,
) -> TrainResult:
    """Fine-tune the base encoder on ``examples`` (a JSONL path or a list).

    ``eval_examples``, when given, are ranked with :func:`evaluate` before and after
    training, and both figures go into the metrics. ``on_step(step, loss)`` is called
    after each step.

    Metrics: ``losses`` (one per step), ``steps``, ``examples``, ``seconds`` (the whole
    call), ``train_seconds``, ``compile_seconds`` (the steps of a new shape, which
    compile), ``shapes`` (the padded [query, document] lengths met; [pair] for a reranker),
    ``steps_per_second`` and ``cpu_seconds_per_step`` (over the steps of a shape
    already compiled; CPU time is what a step costs whatever else runs on the
    machine), and ``before``/``after`` when evaluated.

    Raises:
        ConfigError: bad options or examples.
        ModelError: the base model cannot be found or read.
    """
    options = options or TrainOptions()
    options.check()
    started = time.perf_counter()
    data = read_examples(examples)
    if len(data) < 2:
        raise ConfigError("Training needs at least two examples (in-batch negatives)")
    sources = sorted({e.source for e in data if e.source})
    _limit_threads(options.threads)
    config, base_params, base_dir = load_base(base)
    if options.kind == "reranker":
        base_params = {**base_params, **head_params(config, options.seed)}
    tokenizer = TextTokenizer(base_dir / "tokenizer.json")
    texts = sorted({e.query for e in data} | {e.positive for e in data}
                   | {n for e in data for n in e.negatives})
    lengths = dict(zip(texts, tokenizer.lengths(texts), strict=True))

    metrics: dict[str, Any] = {
        "examples": len(data),
        "source_count": len(sources),
        "sources": sources[:_SOURCES_KEPT],
        "options": asdict(options),
    }
    if eval_examples is not None:
        metrics["before"] = evaluate(base_params, config, tokenizer, eval_examples,
                                     max_length=options.max_length)

    per_epoch = math.ceil(len(data) / options.batch_size)
    total = per_epoch * options.epochs
    if options.max_steps is not None:
        total = min(total, options.max_steps)
    warmup = int(total * options.warmup_ratio)
    hyper = _Hyper(config, options.scale, options.dropout, options.weight_decay,
                   options.max_grad_norm, options.kind)
    make_arrays = _rerank_arrays if options.kind == "reranker" else _arrays
    rng = np.random.default_rng(options.seed)
    key = jax.random.PRNGKey(options.seed)
    params = {name: jnp.array(value) for name, value in base_params.items()}
    state: dict[str, Any] = {
        "count": jnp.zeros((), jnp.int32),
        "m": {name: jnp.zeros_like(value) for name, value in params.items()},
        "v": {name: jnp.zeros_like(value) for name, value in params.items()},
    }
    losses: list[float] = []
    step = 0
    compile_seconds = 0.0
    train_started = time.perf_counter()
    steady_wall = steady_cpu = 0.0
    steady_steps = 0
    shapes: list[list[int]] = []
    log.info("retriever training", examples=len(data), steps=total, warmup=warmup)
    while step < total:
        for batch in _batches(data, options, rng):
            if step >= total:
                break
            step += 1
            arrays = make_arrays(batch, options, tokenizer, lengths)
            shape = ([arrays["ids"].shape[1]] if options.kind == "reranker"
                     else [arrays["q_ids"].shape[1], arrays["d_ids"].shape[1]])
            new_shape = shape not in shapes
            if new_shape:
                shapes.append(shape)
            key, step_key = jax.random.split(key)
            lr = jnp.float32(_learning_rate(step, total, warmup, options.lr))
            wall, cpu = time.perf_counter(), _cpu_seconds()
            params, state, loss, norm = _jitted_step(params, state, arrays, lr, step_key,
                                                     hyper=hyper)
            value = float(loss)
            if new_shape:
                compile_seconds += time.perf_counter() - wall
            else:
                steady_steps += 1
                steady_wall += time.perf_counter() - wall
                steady_cpu += _cpu_seconds() - cpu
            if not math.isfinite(value):
                raise ConfigError(f"Training diverged at step {step} (loss {value}); "
                                  "lower the learning rate")
            losses.append(value)
            if on_step is not None:
                on_step(step, value)
            if step % 10 == 0 or step == total:
                log.info("retriever step", step=step, of=total, loss=round(value, 4),
                         grad_norm=round(float(norm), 3))
    trained = {name: np.asarray(value) for name, value in params.items()}
    metrics.update({
        "steps": step,
        "losses": losses,
        "train_seconds": time.perf_counter() - train_started,
        "compile_seconds": compile_seconds,
        "shapes": shapes,
        "steps_per_second": steady_steps / steady_wall if steady_wall > 0 else None,
        "cpu_seconds_per_step": steady_cpu / steady_steps if steady_steps else None,
    })
    if eval_examples is not None:
        metrics["after"] = evaluate(trained, config, tokenizer, eval_examples,
                                    max_length=options.max_length)
    metrics["seconds"] = time.perf_counter() - started
    return TrainResult(trained, config, base_dir / "tokenizer.json", base_dir, options,
                       metrics)
