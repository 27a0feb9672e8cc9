"""The learned reranker (a cross-encoder), end to end with real JAX, ONNX and onnxruntime.

One tiny training run (five steps on the 40 hand-written (goal, AXTree line) pairs)
is shared by the module: it must put each goal's line above its hard negatives more
often than its untrained head did; its export must score what JAX scores (float) or
nearly (int8); the agent layer's ``TrainedReranker`` must read it and refuse a folder
of the other kind; and the stage evaluation must reorder an embedder's best units with
it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("jax")
pytest.importorskip("onnx")

import onnxruntime as ort

from linewise.agent.text.learned import (
    TrainedEmbedder,
    TrainedReranker,
    manifest_kind,
    read_manifest,
)
from linewise.apps.filter_eval import load_cases
from linewise.apps.retriever.encoder import TextTokenizer
from linewise.apps.retriever.evaluate import evaluate_stage
from linewise.apps.retriever.examples import Example, read_examples
from linewise.apps.retriever.export import export_trained
from linewise.apps.retriever.train import TrainOptions, TrainResult, score_pairs, train
from linewise.errors import ConfigError, ModelError
from tests.support.cli import linewise

PAIRS = Path(__file__).parent / "data" / "pairs.jsonl"
CASES = Path(__file__).parents[3] / "tasks" / "filter-cases"
OPTIONS = TrainOptions(kind="reranker", batch_size=8, lr=1e-4, seed=0, warmup_ratio=0.1,
                       negatives_per_example=1, in_batch_negatives=2)


@pytest.fixture(scope="module")
def examples() -> list[Example]:
    return read_examples(PAIRS)


@pytest.fixture(scope="module")
def trained(examples: list[Example]) -> TrainResult:
    return train(PAIRS, OPTIONS, eval_examples=examples)


@pytest.fixture(scope="module")
def exported(trained: TrainResult, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("reranker")
    export_trained(trained, root / "weights", command="pytest tests/apps/retriever",
                   float_onnx=root / "float.onnx")
    return root


def _pairs(examples: list[Example]) -> tuple[list[str], list[str]]:
    queries, texts = [], []
    for example in examples:
        for text in (example.positive, *example.negatives):
            queries.append(example.query)
            texts.append(text)
    return queries, texts


@pytest.mark.slow
def test_training_puts_each_goals_line_above_its_negatives(trained: TrainResult) -> None:
    metrics = trained.metrics
    before, after = metrics["before"], metrics["after"]
    assert metrics["steps"] == 5 and all(np.isfinite(metrics["losses"]))
    assert after["pair_accuracy"] > before["pair_accuracy"] + 0.1, (before, after)
    assert after["mrr"] > before["mrr"], (before, after)
    assert metrics["shapes"] == [[32]]  # one pair length: one compiled shape
    assert "head_kernel" in trained.params and trained.params["head_kernel"].shape == (384, 1)


def test_a_reranker_without_negatives_is_refused() -> None:
    with pytest.raises(ConfigError, match="at least one negative"):
        TrainOptions(kind="reranker", negatives_per_example=0, in_batch_negatives=0).check()
    with pytest.raises(ConfigError, match="Unknown retriever kind"):
        TrainOptions(kind="colbert").check()  # type: ignore[arg-type]


@pytest.mark.slow
def test_the_export_scores_what_jax_scores(
    trained: TrainResult, exported: Path, examples: list[Example]
) -> None:
    queries, texts = _pairs(examples)
    tokenizer = TextTokenizer(trained.tokenizer_path)
    expected = score_pairs(trained.params, trained.config, tokenizer, queries, texts)
    ids, mask, types = tokenizer.pairs(queries, texts, 128)
    assert types.max() == 1  # the unit's tokens are of the second type
    feeds = {"input_ids": ids.astype(np.int64), "attention_mask": mask.astype(np.int64),
             "token_type_ids": types.astype(np.int64)}
    floats = ort.InferenceSession(str(exported / "float.onnx"),
                                  providers=["CPUExecutionProvider"]).run(
                                      ["relevance"], feeds)[0]
    assert floats.shape == (len(queries),)
    assert np.abs(floats - expected).max() < 1e-4

    # int8 weights move each score a little; what a reranker is for, the order of the
    # texts, must stay: the scores agree closely over every pair of the set.
    reranker = TrainedReranker(exported / "weights")
    got = np.empty_like(expected)
    for query in dict.fromkeys(queries):
        chosen = [i for i, q in enumerate(queries) if q == query]
        got[chosen] = reranker.score_sync(query, [texts[i] for i in chosen])
    correlation = float(np.corrcoef(got, expected)[0, 1])
    print(f"int8 against float: correlation {correlation:.4f}, max abs diff "
          f"{np.abs(got - expected).max():.3f}, spread {np.std(expected):.3f}")
    assert correlation >= 0.95


@pytest.mark.slow
def test_a_folder_says_its_kind_and_each_reader_refuses_the_other(
    exported: Path, tmp_path: Path
) -> None:
    folder = exported / "weights"
    manifest = read_manifest(folder)
    assert manifest_kind(manifest) == "reranker"
    assert manifest["output"] == "relevance" and manifest["dimension"] == 1
    assert manifest["size"] <= 25 * 1024 * 1024
    with pytest.raises(ModelError,
                       match=r"kind 'reranker'.*TrainedEmbedder reads kind 'embedder'"):
        TrainedEmbedder(folder).load()
    # An older manifest names no kind: it is an embedder's, so the reranker refuses it.
    old = tmp_path / "old"
    old.mkdir()
    for path in folder.iterdir():
        (old / path.name).write_bytes(path.read_bytes())
    raw = json.loads((old / "manifest.json").read_text())
    del raw["kind"]
    (old / "manifest.json").write_text(json.dumps(raw))
    with pytest.raises(ModelError,
                       match=r"kind 'embedder'.*TrainedReranker reads kind 'reranker'"):
        TrainedReranker(old).load()


class _PageOrder:
    """Every text the same vector: the embedder's order is the page's."""

    name = "page-order"

    async def embed(self, texts: list[str]) -> np.ndarray:
        return np.ones((len(texts), 4), dtype=np.float32)


@pytest.mark.slow
async def test_the_stage_evaluation_reorders_an_embedders_best_units(
    exported: Path,
) -> None:
    cases = load_cases(CASES / "docs.glob.json")
    reranker = TrainedReranker(exported / "weights")
    plain = {s.kind: s for s in await evaluate_stage(cases, _PageOrder())}
    reranked = {s.kind: s for s in await evaluate_stage(cases, _PageOrder(),
                                                        reranker=reranker, candidates=5)}
    assert reranked["all"].embedder == "page-order+trained:weights"
    # Reordering the five first units cannot change what the first five propose...
    assert reranked["all"].recall[5] == plain["all"].recall[5]
    # ...nor what lies beyond them, where the embedder's order is kept.
    assert reranked["all"].recall[20] == plain["all"].recall[20]


@pytest.mark.slow
def test_the_cli_trains_a_reranker_and_evaluates_it(tmp_path: Path) -> None:
    out = tmp_path / "reranker"
    trained = linewise("retriever", "train", str(PAIRS), "--out", str(out), "--kind",
                       "reranker", "--max-steps", "2", "--batch-size", "8",
                       timeout=600)
    assert trained.returncode == 0, trained.stderr
    assert manifest_kind(read_manifest(out)) == "reranker"
    scored = linewise("retriever", "eval", str(CASES / "docs.glob.json"), "--weights",
                      str(out), timeout=600)
    assert scored.returncode == 0, scored.stderr
    rows = [line.split() for line in scored.stdout.splitlines()[1:]]
    assert {row[0] for row in rows} == {"minilm:all-MiniLM-L6-v2-int8",
                                        "minilm:all-MiniLM-L6-v2-int8+trained:reranker"}
