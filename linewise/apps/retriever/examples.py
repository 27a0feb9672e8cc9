"""Training examples for the learned retriever: a query, the unit it needs, hard negatives.

The learned model scores the same *units* the embedding stage scores at run time
(:func:`linewise.agent.filters.stages.context_embedding.page_units`: a block of the page with
its context, such as a term with the start of its definition under its heading), so an
example's texts are unit texts of a real page, never hand-made strings.

Two sources:

- **Pages** (:func:`page_examples`): what a page states about itself. A named query
  ("Where does this page describe X?") meets the unit whose element is named X; a
  described query is the start of a term's definition with the term's own words taken
  out, meeting the term's unit. Queries written by a model from a unit's text, with its
  key words banned, come from :mod:`.queries`.
- **Traces** (:func:`trace_examples`): each step of a successful episode gives the query
  the filter formed at that step (goal, recent actions and thoughts) and the unit that
  holds the element the action named, or the text its answer quoted.

Negatives are the units of the same page that BM25 ranks highest for the query (hard:
they share its words) plus one drawn at random, never the positive's own text.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from linewise.agent.action_parser import parse_action
from linewise.agent.filters.base import FilterInput, query_text
from linewise.agent.filters.stages.context_embedding import Unit, page_units
from linewise.agent.filters.view.tree import LineTree
from linewise.agent.text.bm25 import LineRanker, line_words, words
from linewise.apps.retriever.sources import PageSnapshot, check_family, page_family
from linewise.errors import ConfigError, DamagedTraceError
from linewise.files import write_atomically
from linewise.jsonl import read_jsonl
from linewise.runtime.trace import read_steps, read_summary

__all__ = ["Example", "ExampleKind", "negatives_for", "page_examples", "read_examples",
           "trace_examples", "write_examples"]

ExampleKind = Literal["named", "described", "written", "trace", "given"]

_NAMED_TEMPLATES = (
    "Open the entry for {name}.",
    "Where does this page describe {name}?",
    "Find {name}.",
    "Go to the part about {name}.",
    "Show me what the page says about {name}.",
    "I need the details of {name}.",
)
_NAMED_ROLES = frozenset({"term", "heading", "link", "button", "row", "listitem"})
_MIN_NAME_CHARS = 3
_MAX_NAME_WORDS = 10
_DESCRIBED_WORDS = 24
"""Words of a definition a described query keeps (its first sentence, at most)."""


class Example(BaseModel):
    """One training example: a query and the unit texts it should and should not meet.

    The one type of the whole pipeline: the dataset builder writes it, ``retriever
    train`` reads it, and a hand-written JSONL file of ``{"query", "positive",
    "negatives", "source"}`` objects is read as the kind ``given``. A negative that is
    blank or the positive's own text is dropped: it would teach the model to push the
    positive away from its own query.
    """

    model_config = ConfigDict(frozen=True)

    query: str
    positive: str
    negatives: tuple[str, ...] = ()
    kind: ExampleKind = "given"
    family: str = ""
    source: str = Field(default="", description="The page URL, or the episode folder and "
                        "step.")

    @field_validator("query", "positive")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must be a non-empty string")
        return value

    @field_validator("negatives")
    @classmethod
    def _real_negatives(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        positive = info.data.get("positive")
        return tuple(n for n in value if n.strip() and n != positive)


def _unit_name(tree: LineTree, unit: Unit) -> str:
    return " ".join((tree.parsed(unit.index).name or "").split()[:_MAX_NAME_WORDS])


def _negatives(units: Sequence[Unit], ranker: LineRanker, query: str, positive: Unit,
               count: int, rng: random.Random) -> list[str]:
    if count <= 0 or len(units) < 2:
        return []
    scores = ranker.scores(query)
    order = sorted(range(len(units)), key=lambda i: -scores[i])
    taken: list[str] = []
    for i in order:
        text = units[i].text
        if text == positive.text or text in taken or _same_place(units[i], positive):
            continue
        taken.append(text)
        if len(taken) == count - 1:
            break
    others = [u.text for u in units if u.text != positive.text and u.text not in taken
              and not _same_place(u, positive)]
    if others:
        taken.append(rng.choice(others))
    return taken


def _same_place(unit: Unit, positive: Unit) -> bool:
    """Whether ``unit`` proposes a line the positive proposes (its block or its anchor):
    a paragraph under the heading a query asks for is no negative."""
    return bool({unit.index, unit.anchor} & {positive.index, positive.anchor})


def _ranker(units: Sequence[Unit]) -> LineRanker:
    return LineRanker([u.text for u in units])


def negatives_for(units: Sequence[Unit], query: str, positive: Unit, count: int,
                  rng: random.Random) -> list[str]:
    """``count`` negatives of ``positive`` for ``query`` among a page's ``units``."""
    return _negatives(units, _ranker(units), query, positive, count, rng)


def page_examples(snapshot: PageSnapshot, *, per_page: int = 40, negatives: int = 3,
                  seed: int = 0) -> list[Example]:
    """Named and described examples of one page, at most ``per_page`` of each kind."""
    tree = LineTree(list(snapshot.lines))
    units = page_units(tree)
    if len(units) < 2:
        return []
    rng = random.Random(f"{seed}:{snapshot.url}")
    ranker = _ranker(units)
    roles = tree.roles
    named: list[Example] = []
    described: list[Example] = []
    for unit in units:
        role = roles[unit.index]
        name = _unit_name(tree, unit)
        if role in _NAMED_ROLES and len(name) >= _MIN_NAME_CHARS and words(name):
            query = rng.choice(_NAMED_TEMPLATES).format(name=name)
            named.append(Example(
                query=query, positive=unit.text, kind="named", family=snapshot.family,
                source=snapshot.url,
                negatives=_negatives(units, ranker, query, unit, negatives, rng)))
        if role == "term":
            description = _described_query(unit.text, name)
            if description:
                described.append(Example(
                    query=description, positive=unit.text, kind="described",
                    family=snapshot.family, source=snapshot.url,
                    negatives=_negatives(units, ranker, description, unit, negatives,
                                         rng)))
    rng.shuffle(named)
    rng.shuffle(described)
    return named[:per_page] + described[:per_page]


def _described_query(unit_text: str, name: str) -> str | None:
    """The start of a term's definition without the term's own words, as a question.

    A unit of a term reads ``context — name definition…``; the definition's words that
    also occur in the name are dropped, so the query describes rather than names.
    """
    own = unit_text.split(" — ", 1)[-1]
    definition = own[len(name):].strip() if own.startswith(name) else own
    first = re.split(r"(?<=[.!?])\s", definition, maxsplit=1)[0]
    banned = set(words(name))
    kept = [w for w in first.split() if not set(words(w)) & banned]
    if len(kept) < 4:
        return None
    return "Which entry does this: " + " ".join(kept[:_DESCRIBED_WORDS])


def _unit_holding(units: Sequence[Unit], tree: LineTree, line: int) -> Unit | None:
    """The smallest unit whose block holds ``line`` (0-based), or whose anchor it is."""
    best: Unit | None = None
    best_size = len(tree) + 1
    for unit in units:
        end = tree.subtree_end[unit.index]
        if unit.index <= line < end or unit.anchor == line:
            size = end - unit.index
            if size < best_size:
                best, best_size = unit, size
    return best


def _episode_folders(root: Path) -> Iterator[Path]:
    if (root / "summary.json").is_file():
        yield root
        return
    for summary in sorted(root.rglob("summary.json")):
        yield summary.parent


def trace_examples(roots: Iterable[Path], *, negatives: int = 3, seed: int = 0,
                   allow_evaluation: bool = False) -> list[Example]:
    """Examples from every successful episode under ``roots`` (episode, run or bench
    folders): one per step whose action named an element or quoted the page.

    Raises:
        ConfigError: a root holds no episode, or an episode of a refused family.
    """
    examples: list[Example] = []
    for root in roots:
        folders = list(_episode_folders(root))
        if not folders:
            raise ConfigError(f"{root}: holds no episode (no summary.json under it)")
        for folder in folders:
            try:
                summary = read_summary(folder)
                if not summary.success:
                    continue
                check_family(page_family(summary.start_url or ""), str(folder),
                             allow_evaluation=allow_evaluation)
                steps = read_steps(folder)
            except DamagedTraceError:
                continue  # a damaged episode gives nothing rather than a wrong example
            rng = random.Random(f"{seed}:{folder}")
            history: list[str] = []
            thoughts: list[str] = []
            for step in steps:
                if step.action is None:
                    continue
                lines = step.tree_lines()
                query = query_text(FilterInput(goal=summary.goal, lines=lines,
                                               history=list(history), thoughts=list(thoughts)))
                example = _step_example(step.action, lines, query, negatives, rng)
                if example is not None:
                    examples.append(example.model_copy(update={
                        "family": page_family(step.url), "source": f"{folder}#{step.index}"}))
                history.append(step.action)
                if step.think:
                    thoughts.append(step.think)
    return examples


def _step_example(action_text: str, lines: list[str], query: str, negatives: int,
                  rng: random.Random) -> Example | None:
    try:
        action = parse_action(action_text)
    except (ValueError, SyntaxError):
        return None
    tree = LineTree(lines)
    units = page_units(tree)
    if len(units) < 2:
        return None
    unit: Unit | None = None
    bids = [v for k, v in action.arguments.items() if k.endswith("bid") and isinstance(v, str)]
    if bids and bids[0] in tree.bid_line:
        unit = _unit_holding(units, tree, tree.bid_line[bids[0]])
    elif action.name == "send_msg_to_user":
        text = str(next(iter(action.arguments.values()), ""))
        wanted = set(line_words(text))
        if wanted:
            overlap = [len(wanted & set(line_words(u.text))) for u in units]
            best = max(range(len(units)), key=lambda i: overlap[i])
            unit = units[best] if overlap[best] >= max(1, len(wanted) // 2) else None
    if unit is None:
        return None
    return Example(query=query, positive=unit.text, kind="trace", family="", source="",
                   negatives=_negatives(units, _ranker(units), query, unit, negatives, rng))


def write_examples(examples: Sequence[Example], path: Path) -> None:
    """The examples as JSONL, one per line (written whole, then moved into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, "".join(e.model_dump_json() + "\n" for e in examples))


def _example(raw: object, where: str) -> Example:
    if isinstance(raw, Example):
        return raw
    try:
        return Example.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        at = f"'{field}' " if field else ""
        raise ConfigError(f"{where}: {at}{first['msg'].lower()}") from None


def read_examples(source: Path | str | Iterable[Example | dict[str, object]]) -> list[Example]:
    """Examples from a JSONL file (written by :func:`write_examples`, or by hand), or
    from ``Example`` objects and dicts.

    Raises:
        ConfigError: the file cannot be read, or a line is not JSON or not an example;
            the file and line are named.
    """
    if not isinstance(source, str | Path):
        return [_example(item, f"example {index}") for index, item in enumerate(source)]
    path = Path(source)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc})") from None
    examples = []
    for line in read_jsonl(data):
        where = f"{path}:{line.number}"
        if line.error is not None:
            raise ConfigError(f"{where}: {line.error}")
        examples.append(_example(line.value, where))
    return examples
