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
import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("jax")
pytest.importorskip("onnx")

import onnxruntime as ort

from linewise.agent.filters.base import FilterInput, query_text
from linewise.agent.filters.focus import FocusFilter
from linewise.agent.filters.registry import (
    FilterContext,
    filter_maker,
    shared_embedder,
    shared_reranker,
)
from linewise.agent.filters.stages.context_embedding import UnitIndex, page_units, unit_groups
from linewise.agent.filters.view.tree import LineTree
from linewise.agent.text.embedders import MiniLMEmbedder
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
from linewise.settings import FilterSettings
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


class _Counting:
    """A reranker stand-in that counts the pairs it is asked to score: the real one's
    scores, recorded."""

    def __init__(self, real: TrainedReranker) -> None:
        self.real = real
        self.asked = 0

    async def score(self, query: str, texts: list[str]) -> np.ndarray:
        self.asked += len(texts)
        return await self.real.score(query, texts)


@pytest.mark.slow
async def test_the_units_stage_takes_the_rerankers_order_and_scores_a_pair_once(
    exported: Path,
) -> None:
    case = load_cases(CASES / "docs.glob.json")[0]
    tree = LineTree(list(case.lines))
    observation = FilterInput(goal=case.goal, lines=case.lines, history=case.history)
    counting = _Counting(TrainedReranker(exported / "weights"))
    plain = await unit_groups(UnitIndex(_PageOrder()), tree, observation, top_k=8)
    index = UnitIndex(_PageOrder(), reranker=counting, candidates=8)  # type: ignore[arg-type]
    reranked = await unit_groups(index, tree, observation, top_k=8)
    # The same eight units (the embedder's eight best), in the reranker's order.
    assert sorted(g.lines for g in reranked) == sorted(g.lines for g in plain)
    units = page_units(tree)[:8]
    scores = await counting.real.score(query_text(observation), [u.text for u in units])
    expected = [units[i] for i in np.argsort(-scores, kind="stable")]
    assert [g.lines[0] for g in reranked] == [min(u.anchor, u.index - 1 if u.index else 0)
                                              for u in expected]
    assert counting.asked == 8
    await unit_groups(index, tree, observation, top_k=8)  # the same page and query
    assert counting.asked == 8


@pytest.mark.slow
def test_a_reranker_folder_reorders_units_and_leaves_the_embedder_as_configured(
    exported: Path,
) -> None:
    settings = FilterSettings(retriever_weights=exported / "weights")
    provide = shared_reranker(settings)
    assert provide is not None and isinstance(provide(), TrainedReranker)
    assert provide() is provide()
    assert isinstance(shared_embedder(settings)(), MiniLMEmbedder)
    assert shared_reranker(FilterSettings()) is None
    # the filter an episode gets reranks with it
    focus = settings.model_copy(update={"name": "focus",
                                        "focus_preset": "candidates-units"})
    made = filter_maker(FilterContext(settings=focus, embedder=shared_embedder(focus),
                                      reranker=shared_reranker(focus)))()
    assert isinstance(made, FocusFilter) and made._units is not None
    assert isinstance(made._units.reranker, TrainedReranker)


@pytest.mark.slow
async def test_a_damaged_reranker_leaves_the_stage_in_the_embedders_order(
    exported: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "weights"
    shutil.copytree(exported / "weights", folder)
    with open(folder / "model.onnx", "r+b") as model:
        model.seek(1_000_000)
        byte = model.read(1)
        model.seek(1_000_000)
        model.write(bytes([byte[0] ^ 0xFF]))
    case = load_cases(CASES / "docs.glob.json")[0]
    tree = LineTree(list(case.lines))
    observation = FilterInput(goal=case.goal, lines=case.lines, history=case.history)
    plain = await unit_groups(UnitIndex(_PageOrder()), tree, observation, top_k=8)
    index = UnitIndex(_PageOrder(), reranker=TrainedReranker(folder))
    assert await unit_groups(index, tree, observation, top_k=8) == plain
    assert index.reranker is None  # dropped once, not tried again on every step
