"""``linewise retriever``: the learned line retriever's data, training and evaluation.

    linewise retriever data --pages DIR... [--traces RUN...] --out DATASET
        [--per-family N] [--written N] [--base-url URL --model NAME]
    linewise retriever train DATASET... --out WEIGHTS [--kind reranker] [--epochs N] [--seed N]
    linewise retriever eval CASES... [--weights WEIGHTS]...
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from linewise.cli.commands import summary
from linewise.cli.flags import add_log_level_flag, settings_from_args
from linewise.errors import ConfigError

if TYPE_CHECKING:
    from linewise.apps.retriever.dataset import DatasetManifest, DatasetOptions
    from linewise.apps.retriever.evaluate import StageScore

# What the commands run (Chromium, JAX, the embedders) is imported by the command
# functions, so that their ``--help`` appears at once.


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    retriever = sub.add_parser("retriever", help=summary("retriever"))
    actions = retriever.add_subparsers(dest="retriever_command", required=True,
                                       help="data: build a training set; train: fine-tune "
                                       "the encoder on it; eval: score embedders on cases")
    data = actions.add_parser(
        "data", help="pages and solved traces -> training examples",
        description="Read documentation folders with Chromium and derive examples from "
        "what each page states (a named element; a term described by its definition), "
        "from solved episodes (the unit each step's action needed), and, with --written, "
        "from queries a model writes with the element's own words banned. Families "
        "reserved for independent evaluation are refused; so are the families linewise's "
        "own held-out figures use, unless --allow-evaluation-families.")
    data.add_argument("--pages", nargs="+", type=Path, default=[], metavar="DIR",
                      help="folders of HTML pages, e.g. /usr/share/doc/python-flask-doc")
    data.add_argument("--traces", nargs="+", type=Path, default=[], metavar="RUN",
                      help="run, bench or episode folders; their solved episodes are used")
    data.add_argument("--out", type=Path, required=True, metavar="DIR",
                      help="the dataset folder (a rerun reuses its pages and written "
                      "queries)")
    data.add_argument("--per-family", type=int, default=30, metavar="N",
                      help="pages read from each folder (default 30)")
    data.add_argument("--per-page", type=int, default=40, metavar="N",
                      help="named and described examples kept per page, each (default 40)")
    data.add_argument("--written", type=int, default=0, metavar="N",
                      help="queries a model writes per page (default 0: none)")
    data.add_argument("--seed", type=int, default=0, help="seed of every draw (default 0)")
    data.add_argument("--allow-evaluation-families", action="store_true",
                      help="allow the families linewise's held-out figures are measured on")
    data.add_argument("--base-url", help="endpoint of the model that writes queries "
                      "(default: the embedded model)")
    data.add_argument("--model", help="that model's name")
    data.add_argument("--api-key", help="API key (default: OPENAI_API_KEY)")
    add_log_level_flag(data, "WARNING")
    data.set_defaults(handler=cmd_data)
    _add_train(actions)
    _add_eval(actions)


def _add_train(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    train = actions.add_parser(
        "train", help="fine-tune the encoder on datasets -> a weights folder",
        description="Fine-tune all-MiniLM-L6-v2 as a bi-encoder or a reranker on the "
        "datasets' examples (in-batch and hard negatives), on the CPU with JAX (the `train` "
        "extra), and write "
        "an int8 ONNX weights folder with a manifest (sources, command, seed, metrics, "
        "sha256 of each file) for --retriever-weights.")
    train.add_argument("datasets", nargs="+", type=Path, metavar="DATASET",
                       help="dataset folders (linewise retriever data) or examples files")
    train.add_argument("--out", type=Path, required=True, metavar="DIR",
                       help="the weights folder to write")
    train.add_argument("--epochs", type=int, default=1, metavar="N", help="(default 1)")
    train.add_argument("--batch-size", type=int, default=32, metavar="N", help="(default 32)")
    train.add_argument("--lr", type=float, default=2e-5, help="peak learning rate "
                       "(default 2e-5)")
    train.add_argument("--max-length", type=int, default=128, metavar="N",
                       help="tokens per text (default 128)")
    train.add_argument("--max-steps", type=int, metavar="N", help="stop after N steps")
    train.add_argument("--seed", type=int, default=0, help="(default 0)")
    train.add_argument("--kind", choices=("bi-encoder", "reranker"), default="bi-encoder",
                       help="bi-encoder (one vector per text: ranks a whole page) or "
                       "reranker (reads query and unit together: reorders the best units "
                       "of an embedder) (default bi-encoder)")
    train.add_argument("--negatives", type=int, metavar="N",
                       help="hard negatives per example in each step (default 1 for a "
                       "bi-encoder, 3 for a reranker)")
    add_log_level_flag(train, "WARNING")
    train.set_defaults(handler=cmd_train)


def _add_eval(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    evaluate = actions.add_parser(
        "eval", help="recall of the unit stage on filter-eval cases, per embedder",
        description="Rank each case's page units by each embedder for the case's query "
        "and print recall@5/10/20 of the gold lines by goal kind: the offline MiniLM, "
        "and each --weights folder.")
    evaluate.add_argument("cases", nargs="+", type=Path, metavar="CASES",
                          help="filter-eval case files or folders (tasks/filter-cases)")
    evaluate.add_argument("--weights", type=Path, action="append", default=[],
                          metavar="DIR", help="a trained weights folder (repeatable); a "
                          "reranker reorders the MiniLM's best units")
    evaluate.add_argument("--no-minilm", action="store_true",
                          help="leave out the offline MiniLM baseline")
    add_log_level_flag(evaluate, "WARNING")
    evaluate.set_defaults(handler=cmd_eval)


def cmd_data(args: argparse.Namespace) -> int:
    from linewise.apps.retriever.dataset import DatasetOptions

    for name in ("per_family", "per_page"):
        if getattr(args, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be at least 1")
    if args.written < 0:
        raise ConfigError("--written must be 0 or more")
    options = DatasetOptions(
        folders=args.pages, runs=args.traces, per_family=args.per_family,
        per_page=args.per_page, written_per_page=args.written, seed=args.seed,
        allow_evaluation=args.allow_evaluation_families)
    command = shlex.join(["linewise", *sys.argv[1:]])
    manifest = asyncio.run(_build(args, options, command))
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(manifest.examples.items())) or "none"
    print(f"{args.out}: {manifest.pages} pages of {len(manifest.families)} families; "
          f"examples: {kinds}")
    if not manifest.examples:
        print("no example could be made from these sources", file=sys.stderr)
        return 1
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from linewise.apps.retriever.dataset import load_dataset
    from linewise.apps.retriever.examples import Example, read_examples
    from linewise.apps.retriever.export import export_trained
    from linewise.apps.retriever.train import TrainOptions, train

    examples: list[Example] = []
    for path in args.datasets:  # a dataset folder, or a JSONL file of examples
        examples += read_examples(path) if path.is_file() else load_dataset(path)
    if not examples:
        raise ConfigError("the datasets hold no example")
    negatives = args.negatives if args.negatives is not None else (
        3 if args.kind == "reranker" else 1)
    options = TrainOptions(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
                           max_length=args.max_length, seed=args.seed,
                           max_steps=args.max_steps, kind=args.kind,
                           negatives_per_example=negatives)
    print(f"training on {len(examples)} examples from {len(args.datasets)} datasets",
          flush=True)

    def on_step(step: int, loss: float) -> None:
        if step % 10 == 0:
            print(f"step {step}: loss {loss:.4f}", flush=True)

    result = train(examples, options, on_step=on_step)
    export_trained(result, args.out, command=shlex.join(["linewise", *sys.argv[1:]]),
                   sources=[str(path) for path in args.datasets])
    metrics = result.metrics
    print(f"{args.out}: {metrics.get('steps')} steps in {metrics.get('seconds', 0):.0f} s; "
          f"loss {metrics['losses'][0]:.3f} -> {metrics['losses'][-1]:.3f}"
          if metrics.get("losses") else f"{args.out}: written")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from linewise.agent.text.embedders import Embedder, MiniLMEmbedder
    from linewise.agent.text.learned import open_weights_by_kind
    from linewise.apps.filter_eval import load_cases
    from linewise.apps.retriever.evaluate import (
        RememberedEmbedder,
        evaluate_stage,
        format_stage_table,
    )

    cases = load_cases(*args.cases)
    embedders: list[Embedder] = [] if args.no_minilm else [MiniLMEmbedder()]
    trained, rerankers = open_weights_by_kind(args.weights)
    embedders += trained
    if not embedders:
        raise ConfigError("nothing to evaluate: give an embedder's --weights or keep the "
                          "MiniLM baseline")
    if rerankers:  # their rows rank the first embedder's units: embed each page once
        embedders[0] = RememberedEmbedder(embedders[0])

    async def scores() -> list[StageScore]:
        rows = [s for e in embedders for s in await evaluate_stage(cases, e)]
        for reranker in rerankers:
            rows += await evaluate_stage(cases, embedders[0], reranker=reranker)
        return rows

    print(format_stage_table(asyncio.run(scores())))
    return 0


async def _build(args: argparse.Namespace, options: DatasetOptions, command: str,
                 ) -> DatasetManifest:
    from linewise.apps.retriever.dataset import build_dataset

    async with contextlib.AsyncExitStack() as stack:
        model = None
        if options.written_per_page:
            from linewise.runtime.models.factory import open_endpoints

            settings = settings_from_args(args)
            model, _ = await stack.enter_async_context(
                open_endpoints(settings, action=True, retriever=False))
        return await build_dataset(args.out, options, model=model, command=command,
                                   progress=lambda text: print(text, flush=True))
