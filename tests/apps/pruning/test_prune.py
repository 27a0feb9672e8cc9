"""The pruner end to end: real trace files in, a scripted chat-completions server as the
extractor and base model, the ``linewise prune`` command, and the dataset it writes."""

from __future__ import annotations

import json
import math
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog.testing

from linewise.agent.models import TokenLogprob, call_model, call_model_with_logprobs
from linewise.agent.response import parse_answer
from linewise.apps.pruning.extractor import GraphExtractor
from linewise.apps.pruning.graph import StateGraph, load_graph
from linewise.apps.pruning.miner import mine
from linewise.apps.pruning.rewriter import clean_thought, gbnf_literal, span_perplexity
from linewise.apps.pruning.trajectory import collect_trajectories, read_trajectory
from linewise.apps.pruning.vote import required_agreement, tally
from linewise.apps.pruning.workspace import Intentions, PageHistory, Workspace
from linewise.cli.main import main
from linewise.records import EpisodeSummary, StepRecord
from linewise.runtime.log import configure_logging
from linewise.runtime.models.chat import ChatClient
from linewise.runtime.trace import EpisodeTraceWriter
from linewise.settings import EndpointSettings
from linewise.testing import ScriptedChatServer, literal_of_grammar, word_tokens

START = "[1] RootWebArea 'Sign up'\n  [5] link 'News'\n  [7] textbox 'Name'\n  [8] button 'Sign up'"
NEWS = "[1] RootWebArea 'News'\n  heading 'Weather today: sunny'\n  [3] link 'Back'"
FILLED = START.replace("textbox 'Name'", "textbox 'Name' value='Alice'")
WELCOME = "[1] RootWebArea 'Welcome'\n  heading 'Welcome, Alice!'"

# (url, page seen, thought, action): a detour to the news page and back, then the work.
DETOUR = [
    ("http://shop.test/signup", START, "Maybe the news page explains the sign-up.",
     "click('5')"),
    ("http://shop.test/news", NEWS, "The news page is irrelevant; going back to the form.",
     "go_back()"),
    ("http://shop.test/signup", START, "Back on the form after that detour, I type the name.",
     "fill('7', 'Alice')"),
    ("http://shop.test/signup", FILLED, "The name is filled in; now submit.", "click('8')"),
    ("http://shop.test/welcome", WELCOME, "The welcome page confirms it.",
     "send_msg_to_user('Signed up as Alice')"),
]
DIRECT = [
    ("http://ok.test/", "[2] button 'OK'", "Press OK.", "click('2')"),
    ("http://ok.test/done", "heading 'OK pressed'", "Done.", "send_msg_to_user('pressed')"),
]

GOALS = {"signup": "Sign up with the name Alice.", "ok": "Press the OK button and report."}

# The extractor's information answers, by the next action's text.
INFO: dict[str, dict[str, Any]] = {
    "click('5')": {"information": [
        {"text": "textbox Name [7]", "same_as": None, "used_by_next": False},
        {"text": "button Sign up [8]", "same_as": None, "used_by_next": False},
        {"text": "link News [5]", "same_as": None, "used_by_next": True}],
        "next_relies_on": []},
    "go_back()": {"information": [
        {"text": "news page: the weather is sunny", "same_as": None, "used_by_next": True}],
        "next_relies_on": []},
    "fill('7', 'Alice')": {"information": [
        {"text": "textbox Name [7]", "same_as": "I1", "used_by_next": True},
        {"text": "button Sign up [8]", "same_as": "I2", "used_by_next": False},
        {"text": "link News [5]", "same_as": "I3", "used_by_next": False}],
        "next_relies_on": ["I0"]},
    "click('8')": {"information": [
        {"text": "the Name field holds Alice", "same_as": None, "used_by_next": True}],
        "next_relies_on": ["I2"]},
    "send_msg_to_user('Signed up as Alice')": {"information": [
        {"text": "Welcome, Alice! is shown", "same_as": None, "used_by_next": True}],
        "next_relies_on": []},
    "click('2')": {"information": [
        {"text": "button OK [2]", "same_as": None, "used_by_next": True}],
        "next_relies_on": []},
    "send_msg_to_user('pressed')": {"information": [
        {"text": "OK was pressed", "same_as": None, "used_by_next": True}],
        "next_relies_on": []},
}
CANDIDATES = [
    "I should fill in the form.",
    "The sign-up form asks for a name, so I type Alice into the Name box.",
    "Type the name.",
]
BEST = CANDIDATES[1]


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """``main`` points structlog at the test's captured stderr, which closes after the
    test: configure it back as conftest does, or later tests fail to log."""
    yield
    configure_logging(json_lines=False, level="WARNING")


def write_episode(run: Path, name: str, task_id: str, goal: str,
                  steps: list[tuple[str, str, str, str]], success: bool = True) -> Path:
    directory = run / name
    writer = EpisodeTraceWriter(directory)
    summary = EpisodeSummary(episode_id=f"ep-{name}", task_id=task_id, goal=goal,
                             start_url=steps[0][0])
    writer.start(summary)
    for index, (url, page, think, action) in enumerate(steps):
        writer.write_step(StepRecord(
            episode_id=summary.episode_id, task_id=task_id, index=index, url=url,
            axtree=page, observation=page, think=think, action=action,
            done=index == len(steps) - 1, reward=1.0 if success and index == len(steps) - 1
            else 0.0))
    summary.status, summary.success, summary.n_steps = "finished", success, len(steps)
    summary.termination = "agent_done"
    writer.write_summary(summary)
    return directory


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "runs" / "20261122-000000"
    run.mkdir(parents=True)
    (run / "run.json").write_text("{}")
    write_episode(run, "signup", "signup", GOALS["signup"], DETOUR)
    write_episode(run, "ok", "ok", GOALS["ok"], DIRECT)
    write_episode(run, "failed", "signup", GOALS["signup"], DETOUR[:2], success=False)
    return run


def section(prompt: str, heading: str) -> str:
    return prompt.split(heading, 1)[1].split("\n# ", 1)[0]


class Extractor:
    """A scripted extractor and rewriter; ``info_variants`` overrides the information
    answer of an action on its n-th request (one per graph build, builds being serial)."""

    def __init__(self, info_variants: dict[str, list[dict[str, Any]]] | None = None,
                 bad_first: set[str] | None = None,
                 candidates: list[str] | None = None) -> None:
        self.info_variants = info_variants or {}
        self.candidates = candidates or CANDIDATES
        self.bad_first = set(bad_first or ())
        self.seen: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        prompt = messages[0]["content"]
        if messages[0]["role"] == "system":  # the agent's prompt: a scoring request
            return "<think>Something else entirely.</think><action>noop()</action>"
        if "into an action node" in prompt:
            action = section(prompt, "# The step to summarise").split("Action: ", 1)[1]
            action = action.splitlines()[0].strip()
            return json.dumps({"type": action.split("(")[0], "goal": f"do {action}"})
        if "build the information nodes" in prompt:
            action = section(prompt, "# The agent's next action").split("Action: ", 1)[1]
            action = action.splitlines()[0].strip()
            with self.lock:
                self.seen[action] += 1
                count = self.seen[action]
            if action in self.bad_first and count == 1 and len(messages) == 1:
                return json.dumps({"information": [{"text": "x", "same_as": "I9",
                                                    "used_by_next": True}],
                                   "next_relies_on": []})
            variants = self.info_variants.get(action)
            if variants:
                return json.dumps(variants[(count - 1) % len(variants)])
            return json.dumps(INFO[action])
        if "You repair the reasoning" in prompt:
            with self.lock:
                self.seen["rewrite"] += 1
                return self.candidates[(self.seen["rewrite"] - 1) % len(self.candidates)]
        raise AssertionError(f"unexpected prompt: {prompt[:200]}")


def base_model_logprobs(messages: list[dict[str, Any]], text: str) -> list[tuple[str, float]]:
    """The base model likes the best candidate: -0.1 per token, -2 for anything else."""
    return [(token, -0.1 if BEST in text else -2.0) for token in word_tokens(text)]


def prune(run_dir: Path, out: Path, server: ScriptedChatServer, *extra: str) -> int:
    return main(["prune", str(run_dir), "--out", str(out), "--base-url", server.base_url,
                 "--model", "scripted", "--log-level", "WARNING", *extra])


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith(("LINEWISE_", "OPENAI_")):
            monkeypatch.delenv(name)


# ------------------------------------------------------------------ end to end


def test_a_detour_is_pruned_rewritten_and_exported(run_dir: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    script = Extractor()
    out = tmp_path / "dataset"
    with ScriptedChatServer(script, logprobs=base_model_logprobs, follow_grammar=True) as llm:
        assert prune(run_dir, out, llm) == 0
        requests = llm.requests

    # phase 2 may only reference the workspace: its ids are the schema's enum
    info_schemas = [r["response_format"]["json_schema"]["schema"] for r in requests
                    if r.get("response_format", {}).get("json_schema", {}).get("name")
                    == "information"]
    assert info_schemas
    for schema in info_schemas:
        allowed = schema["properties"]["next_relies_on"]["items"]["enum"]
        assert "I0" in allowed and all(i.startswith("I") for i in allowed)
    assert max(len(s["properties"]["next_relies_on"]["items"]["enum"])
               for s in info_schemas) > 1  # the workspace grows as the steps are read

    stats = json.loads((out / "stats.json").read_text())
    assert {k: stats[k] for k in ("episodes_found", "skipped", "trajectories_in", "built",
                                  "agreed", "pruned", "unpruned", "discarded",
                                  "rounds_before", "rounds_after")} == {
        "episodes_found": 3, "skipped": 1, "trajectories_in": 2, "built": 2, "agreed": 2,
        "pruned": 1, "unpruned": 1, "discarded": 0, "rounds_before": 7, "rounds_after": 5}
    assert 0 < stats["tokens_after"] < stats["tokens_before"]
    assert stats["rewrites"] == 1 and stats["rewrites_by_perplexity"] == 1
    assert "trajectories 2: 1 pruned, 1 with nothing to prune" in capsys.readouterr().out

    # The detour (steps 0 and 1) is gone; the necessary steps 2, 3, 4 remain.
    [line] = read_jsonl(out / "pruned.jsonl")
    assert line["metadata"] == {
        "run": str(run_dir), "episode": "signup", "episode_id": "ep-signup",
        "task_id": "signup", "kept_steps": [2, 3, 4], "steps_before": 5,
        "rewritten_steps": [2], "source": "pruned"}
    messages = line["messages"]
    assert [m["role"] for m in messages] == ["system"] + ["user", "assistant"] * 3
    answers = [parse_answer(m["content"]) for m in messages if m["role"] == "assistant"]
    assert [str(a.action) for a in answers] == [
        "fill('7', 'Alice')", "click('8')", "send_msg_to_user('Signed up as Alice')"]
    # The thought that followed the detour is rewritten: the lowest-perplexity candidate.
    assert answers[0].think == BEST
    assert [a.think for a in answers[1:]] == [DETOUR[3][2], DETOUR[4][2]]
    first_user = messages[1]["content"]
    assert "textbox 'Name'" in first_user and "first step" in first_user
    assert "news" not in first_user.lower().replace("link 'news'", "")
    assert BEST in messages[3]["content"]  # the next prompt's history has the new thought

    hybrid = read_jsonl(out / "hybrid.jsonl")
    assert [h["metadata"]["source"] for h in hybrid] == ["pruned", "unpruned"]
    assert hybrid[1]["metadata"]["kept_steps"] == [0, 1]

    # The first two builds agree, so the third is never built.
    graphs = sorted(p.name for p in (out / "graphs").iterdir())
    key = "20261122-000000__signup"
    assert f"{key}.run1.json" in graphs and f"{key}.run2.json" in graphs
    assert f"{key}.run3.json" not in graphs and f"{key}.svg" in graphs
    graph = load_graph(out / "graphs" / f"{key}.run1.json")
    assert mine(graph).necessary_actions == ["A3", "A4", "A5"]
    assert graph.model_extra["necessary_actions"] == ["A3", "A4", "A5"]
    assert graph.node("A2").model_extra["type"] == "go_back"
    assert graph.node("I1").model_extra["text"] == "textbox Name [7]"
    assert ["A2", "I1"] in [list(e) for e in graph.edges]  # the detour re-found the form
    svg = (out / "graphs" / f"{key}.svg").read_text()
    assert svg.startswith("<svg") and "3 of 5 steps kept" in svg

    report = {r.get("key", r.get("episode")): r for r in read_jsonl(out / "trajectories.jsonl")}
    detour = report[key]
    assert detour["status"] == "pruned" and detour["vote_runs"] == [["A3", "A4", "A5"]] * 2
    [rewritten] = [s for s in detour["kept"] if s["rewritten"]]
    assert rewritten["selection"] == "perplexity"
    assert sorted(c["text"] for c in rewritten["candidates"]) == sorted(CANDIDATES)
    ppl = {c["text"]: c["perplexity"] for c in rewritten["candidates"]}
    assert ppl[BEST] == pytest.approx(math.exp(0.1)) and ppl[CANDIDATES[0]] > ppl[BEST]
    assert any(r.get("reason") == "episode did not succeed" for r in report.values())


def test_scoring_asks_the_base_model_with_the_agents_own_prompt(run_dir: Path,
                                                                 tmp_path: Path) -> None:
    with ScriptedChatServer(Extractor(), logprobs=base_model_logprobs,
                            follow_grammar=True) as llm:
        assert prune(run_dir, tmp_path / "d", llm) == 0
    scoring = [r for r in llm.requests if "grammar" in r]
    assert len(scoring) == 3 and all(r["logprobs"] is True for r in scoring)
    forced = {literal_of_grammar(r["grammar"]) for r in scoring}
    assert forced == {f"<think>{c}</think>" for c in CANDIDATES}
    system, user = scoring[0]["messages"]
    assert system["role"] == "system" and "# Action space" in system["content"]
    assert "URL: http://shop.test/signup" in user["content"]


def test_without_logprobs_the_first_candidate_is_taken_and_recorded(
    run_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "dataset"
    with ScriptedChatServer(Extractor()) as llm:  # no logprobs, no grammar
        assert prune(run_dir, out, llm) == 0
    stats = json.loads((out / "stats.json").read_text())
    assert stats["rewrites_first_candidate"] == 1 and stats["rewrites_by_perplexity"] == 0
    [line] = read_jsonl(out / "pruned.jsonl")
    [detour] = [r for r in read_jsonl(out / "trajectories.jsonl") if r.get("status") == "pruned"]
    [rewritten] = [s for s in detour["kept"] if s["rewritten"]]
    assert rewritten["selection"].startswith("first candidate: ")
    assert [c["perplexity"] for c in rewritten["candidates"]] == [None] * 3
    first = rewritten["candidates"][0]["text"]
    assert first in CANDIDATES and rewritten["think"] == first
    assert parse_answer(line["messages"][2]["content"]).think == first
    assert "logprobs" in rewritten["selection"] or "grammar" in rewritten["selection"]


def test_a_candidate_repeating_the_original_thought_is_no_rewrite(
        run_dir: Path, tmp_path: Path) -> None:
    original = DETOUR[2][2]  # "Back on the form after that detour, I type the name."
    copies = [f"<think>{original}</think>", "back on the form after that detour I type the name"]

    def base_model(messages: list[dict[str, Any]], text: str) -> list[tuple[str, float]]:
        # The base model wrote the original, so it likes it best of all.
        cost = -0.01 if "detour" in text else -0.1 if BEST in text else -2.0
        return [(token, cost) for token in word_tokens(text)]

    out = tmp_path / "dataset"
    with ScriptedChatServer(Extractor(candidates=[*copies, BEST]), logprobs=base_model,
                            follow_grammar=True) as llm:
        assert prune(run_dir, out, llm, "--candidates", "3") == 0
    [detour] = [r for r in read_jsonl(out / "trajectories.jsonl") if r.get("status") == "pruned"]
    [rewritten] = [s for s in detour["kept"] if s["rewritten"]]
    assert rewritten["think"] == BEST and rewritten["selection"] == "perplexity"
    assert [c["text"] for c in rewritten["candidates"]] == [BEST]
    assert json.loads((out / "stats.json").read_text())["rewrite_copies_dropped"] == 2


def test_the_vote_discards_a_trajectory_whose_runs_disagree(run_dir: Path,
                                                            tmp_path: Path) -> None:
    final = "send_msg_to_user('Signed up as Alice')"
    variants = [
        INFO[final],  # run 1: the answer rests on the welcome page -> A3, A4, A5
        {"information": [{"text": "Welcome", "same_as": None, "used_by_next": False}],
         "next_relies_on": ["I0"]},  # run 2: on the goal alone -> A5
        {"information": [], "next_relies_on": ["I4"]},  # run 3: on the news page -> A1, A5
    ]
    out = tmp_path / "dataset"
    with ScriptedChatServer(Extractor(info_variants={final: variants})) as llm:
        assert prune(run_dir, out, llm, "--mode", "efficiency") == 0
    stats = json.loads((out / "stats.json").read_text())
    assert stats["discarded"] == 1 and stats["agreed"] == 1 and stats["pruned"] == 0
    assert read_jsonl(out / "pruned.jsonl") == [] and not (out / "hybrid.jsonl").exists()
    [detour] = [r for r in read_jsonl(out / "trajectories.jsonl") if r.get("key", "")
                .endswith("signup")]
    assert detour["status"] == "discarded" and "runs disagree" in detour["reason"]
    assert detour["vote_runs"] == [["A3", "A4", "A5"], ["A5"], ["A1", "A5"]]
    assert detour["kept"] == [] and stats["rounds_before"] == 2  # only the unpruned one
    # a picture per run shows people how the runs differ
    pictures = {run: (out / "graphs" / f"{detour['key']}.run{run}.svg").read_text()
                for run in (1, 2, 3)}
    assert "run 2 of 3 keeps A5 (runs disagree" in pictures[2]
    assert "keeps A1, A5" in pictures[3]


def test_an_invalid_answer_is_retried_with_the_error_fed_back(run_dir: Path,
                                                              tmp_path: Path) -> None:
    out = tmp_path / "dataset"
    with ScriptedChatServer(Extractor(bad_first={"fill('7', 'Alice')"})) as llm:
        assert prune(run_dir, out, llm, "--repeats", "1") == 0
    retries = [r["messages"] for r in llm.requests if len(r["messages"]) == 3]
    assert len(retries) == 1
    assert "same_as 'I9' is not a workspace id" in retries[0][2]["content"]
    stats = json.loads((out / "stats.json").read_text())
    assert stats["extractor_retries"] == 1 and stats["pruned"] == 1


def test_a_trajectory_that_cannot_be_built_is_reported_and_skipped(run_dir: Path,
                                                                    tmp_path: Path) -> None:
    def script(messages: list[dict[str, Any]]) -> str:
        if "Sign up with the name Alice" in messages[0]["content"]:
            return "I am not sure what you want."
        return Extractor()(messages)

    out = tmp_path / "dataset"
    with ScriptedChatServer(script) as llm:
        assert prune(run_dir, out, llm, "--build-retries", "1") == 0
    stats = json.loads((out / "stats.json").read_text())
    assert stats["build_failed"] == 1 and stats["built"] == 1 and stats["unpruned"] == 1
    [detour] = [r for r in read_jsonl(out / "trajectories.jsonl") if r.get("status") ==
                "build_failed"]
    # Two failed runs of three decide the vote: the third is not attempted.
    assert len(detour["errors"]) == 2 and "after 2 attempts" in detour["errors"][0]
    assert "holds no JSON object" in detour["errors"][0]
    assert detour["reason"] == "no graph could be built in 2 run(s)"


def test_rejection_sampling_keeps_tasks_with_a_low_pass_rate(run_dir: Path) -> None:
    # signup: 1 of 2 episodes succeeded (0.5, kept); ok: 1 of 1 (1.0, dropped).
    selection = collect_trajectories([run_dir], pass_rate=(0.0, 0.5))
    assert [t.task_id for t in selection.trajectories] == ["signup"]
    assert selection.pass_rates == {"signup": 0.5, "ok": 1.0}
    everything = collect_trajectories([run_dir.parent], include_failed=True)
    assert sorted(t.episode for t in everything.trajectories) == [
        "20261122-000000/failed", "20261122-000000/ok", "20261122-000000/signup"]


def test_bench_layout_and_unfinished_episodes(tmp_path: Path) -> None:
    bench = tmp_path / "bench"
    write_episode(bench / "none", "ok", "ok", GOALS["ok"], DIRECT)
    running = write_episode(bench / "none", "cut", "ok", GOALS["ok"], DIRECT)
    summary = json.loads((running / "summary.json").read_text())
    (running / "summary.json").write_text(json.dumps({**summary, "status": "running"}))
    write_episode(bench / "_incomplete" / "none", "old", "ok", GOALS["ok"], DIRECT)
    (bench / "results.jsonl").write_text("")
    selection = collect_trajectories([bench])
    assert [t.episode for t in selection.trajectories] == ["none/ok"]
    assert selection.skipped == [(str(running), "episode never finished (summary status "
                                                "is running)")]


def test_episodes_a_person_steered_are_never_taught_as_the_models(tmp_path: Path) -> None:
    run = tmp_path / "run"
    for name in ("approved", "overridden", "skipped", "manual"):
        folder = write_episode(run, name, name, GOALS["ok"], DIRECT)
        lines = (folder / "steps.jsonl").read_text().splitlines()
        first = StepRecord.model_validate_json(lines[0])
        first.operator = name  # type: ignore[assignment]
        lines[0] = first.model_dump_json()
        (folder / "steps.jsonl").write_text("\n".join(lines) + "\n")
    selection = collect_trajectories([run])
    [kept] = selection.trajectories
    assert kept.episode == "approved" and kept.steps[0].operator == "approved"
    assert sorted(reason for _, reason in selection.skipped) == [
        f"a person decided steps at the step-through prompt (0: {name})"
        for name in ("manual", "overridden", "skipped")]


# ------------------------------------------------------------------ parts


# A small extractor's answers for a re-fill loop: each piece new (same_as null), but the
# later ones repeat an earlier piece word for word, or copy its workspace line with its id;
# some copy the prompt's action lines, which are not information at all.
REFILL_INFO = {
    "A1": [("textbox Name [7]", True), ("button Sign up [8]", False)],
    "A2": [("The Name field holds Alice", True)],
    "A3": [("the name field holds 'Alice'.", True)],
    "A4": [("I3: The Name field holds Alice", True), ("I2", True),
           ("A4: click('8')", True), ("A3: fill — type the name", False),
           ("Thought: Submit.", True)],
    "A5": [("Welcome, Alice! is shown", True)],
}


async def build_graph(run: Path, script: Callable[[list[dict[str, Any]]], str]
                      ) -> tuple[StateGraph, GraphExtractor]:
    """The state graph of the one episode under ``run``, built by a scripted extractor."""
    [trajectory] = collect_trajectories([run]).trajectories
    with ScriptedChatServer(script) as llm:
        client = ChatClient(EndpointSettings(base_url=llm.base_url, model="m"))
        extractor = GraphExtractor(client)
        graph = await extractor.build(trajectory)
        await client.close()
    return graph, extractor


def refill_extractor(messages: list[dict[str, Any]]) -> str:
    prompt = messages[0]["content"]
    if "into an action node" in prompt:
        return json.dumps({"type": "fill", "goal": "type the name"})
    next_id = prompt.split("# The agent's next action (", 1)[1].split(")", 1)[0]
    return json.dumps({"information": [
        {"text": text, "same_as": None, "used_by_next": used}
        for text, used in REFILL_INFO[next_id]], "next_relies_on": []})


async def test_repeated_pieces_are_one_node_so_repeated_steps_are_pruned(
        tmp_path: Path) -> None:
    steps = [("http://shop.test/signup", START, "Type the name.", "fill('7', 'Alice')"),
             *[("http://shop.test/signup", FILLED, "Type it again.", "fill('7', 'Alice')")] * 2,
             ("http://shop.test/signup", FILLED, "Submit.", "click('8')"),
             ("http://shop.test/welcome", WELCOME, "Done.", "send_msg_to_user('ok')")]
    run = tmp_path / "run"
    write_episode(run, "refill", "signup", GOALS["signup"], steps)
    graph, extractor = await build_graph(run, refill_extractor)
    assert [n.id for n in graph.nodes if n.kind == "info"] == ["I0", "I1", "I2", "I3", "I4"]
    assert extractor.usage.text_matches == 3
    assert extractor.usage.prompt_copies == 3  # copies of the prompt's action lines
    # A2 and A3 re-found what A1 had produced; only A1, the submit and the answer remain.
    assert mine(graph).necessary_actions == ["A1", "A4", "A5"]


CHECKBOX = ("[1] RootWebArea 'Click Checkboxes Task'\n  [13] generic 'Select Nb and click "
            "Submit.'\n  [20] checkbox 'Nb', checked='false'\n  [22] button 'Submit'")
CHECKED = CHECKBOX.replace("checked='false'", "checked='true'")
# (page, thought, action, the action node's goal, pieces of the page before the action):
# what the embedded 1.5B extractor answered on MiniWoB's click-checkboxes. Besides page
# facts it restates the agent's intention (an action goal, nearly or exactly; "the agent
# needs to …"), says a fact again in other small words, and copies a prompt heading.
INTENT_STEPS = [
    (CHECKBOX, "I select the 'Nb' checkbox first.", "click('20')",
     "Select the 'Nb' checkbox and then click the 'Submit' button.",
     [("Select Nb and click Submit.", False), ("checkbox Nb [20] is not checked", True)]),
    (CHECKED, "Let me scroll to see the whole form.", "scroll(0, 200)",
     "Scroll down to see the form.",
     [("The checkbox Nb [20] is checked", False),
      ("Select the 'Nb' checkbox and then click the 'Submit' button.", True)]),
    (CHECKED, "Nb is checked, so I click the Submit button now.", "click('22')",
     "click the 'Submit' button to submit the form.",
     [("the checkbox Nb [20] is now checked", True),
      ("Click the 'Nb' checkbox and then click the 'Submit' button.", True),
      ("The agent needs to click the Submit button", True),
      ("The page the agent then saw", False), ("The agent's next action (A3)", False),
      ("button Submit [22]", True)]),
]


def intent_extractor(messages: list[dict[str, Any]]) -> str:
    prompt = messages[0]["content"]
    if "into an action node" in prompt:
        step = int(prompt.split("(step ", 1)[1].split(")", 1)[0])
        return json.dumps({"type": "click", "goal": INTENT_STEPS[step][3]})
    position = int(prompt.split("# The agent's next action (A", 1)[1].split(")", 1)[0]) - 1
    return json.dumps({"information": [
        {"text": text, "same_as": None, "used_by_next": used}
        for text, used in INTENT_STEPS[position][4]], "next_relies_on": []})


async def test_a_restated_intention_is_the_goal_so_the_step_before_it_is_pruned(
        tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_episode(run, "checkbox", "click-checkboxes", "Select Nb and click Submit.",
                  [("http://m.test/", page, think, action)
                   for page, think, action, _, _ in INTENT_STEPS])
    graph, extractor = await build_graph(run, intent_extractor)
    texts = {n.model_extra["text"] for n in graph.nodes if n.kind == "info"}
    # The page's facts are nodes; no intention and no heading is.
    assert texts == {"Select Nb and click Submit.", "checkbox Nb [20] is not checked",
                     "The checkbox Nb [20] is checked", "button Submit [22]"}
    assert extractor.usage.text_matches == 2  # the goal on the page; "is now checked"
    assert extractor.usage.intent_matches == 3
    assert extractor.usage.prompt_copies == 2
    assert not [edge for edge in graph.edges if edge[1] == "I0"]
    # The Submit button, first mentioned at step 2, was on the start page all along; the
    # checked box first appeared after A1.
    assert extractor.usage.traced_back == 1
    shown = {n.model_extra["text"]: n.model_extra["step"] for n in graph.nodes
             if n.kind == "info" and n.id != "I0"}
    assert shown["button Submit [22]"] == 0
    assert shown["The checkbox Nb [20] is checked"] == 1
    # The scroll only "produced" a restated intention: it goes; the check and the submit
    # stay. Taken as new nodes, the intentions would have kept every step.
    assert mine(graph).necessary_actions == ["A1", "A3"]


def test_a_rewording_repeats_an_entry_but_a_negation_or_a_number_does_not() -> None:
    space = Workspace()
    space.add_info("Select Nb and click Submit.")
    checked = space.add_info("The Nb checkbox is checked")
    cart = space.add_info("2 items are in the cart")
    assert space.match("the 'Nb' checkbox is now checked.") == checked
    assert space.match("The Nb checkbox is not checked") is None
    assert space.match("3 items are in the cart") is None
    assert space.match(f"{cart}: whatever the model wrote after the id") == cart


def test_a_fact_is_traced_to_the_page_that_first_showed_it() -> None:
    pages = PageHistory([CHECKBOX, CHECKED, CHECKED])
    assert pages.first_shown("button Submit [22]", 2) == 0
    assert pages.first_shown("Nb [20] is checked", 2) == 1  # the start page said false
    assert pages.first_shown("the weather is sunny", 2) == 2  # no line supports it
    # worded freely, as the embedded extractor does: the unchanged Submit line holds it
    assert pages.first_shown("The page has a Submit button that can be pressed", 2) == 0
    assert pages.first_shown("The Nb checkbox is ticked now", 2) == 1
    # A fact may span lines; a moved focus changes no fact but the focus itself.
    dialog = ("[33] dialog 'Confirm'\n  StaticText 'Delete the file?'\n"
              "  [43] button 'Cancel', focused\n  [44] button 'OK'")
    focus_moved = dialog.replace("'Cancel', focused", "'Cancel'").replace(
        "button 'OK'", "button 'OK', focused")
    pages = PageHistory([dialog, focus_moved])
    assert pages.first_shown("The dialog Confirm asks to delete the file, with an OK", 1) == 0
    assert pages.first_shown("The OK button is focused", 1) == 1


def test_an_intention_is_an_action_goal_or_a_plan_never_a_fact() -> None:
    intentions = Intentions()
    intentions.add_goal("Select the 'Nb' checkbox and then click the 'Submit' button.")
    intentions.add_goal("Check that the name field holds Alice")
    assert intentions.restated_by("Click the Nb checkbox and then click the Submit button")
    assert intentions.restated_by("Now I'll type the name into the box")
    assert intentions.restated_by("The agent needs to press Submit first.")
    assert intentions.restated_by("The goal is to select QWS1FL and click Submit.")
    assert intentions.restated_by("The agent clicked the radio button QWS1FL.")
    assert intentions.restated_by("I see a dialog. The OK button is the one I need to click.")
    assert not intentions.restated_by("checkbox Nb [20] is not checked")
    # Nearly the goal of a checking step, but a fact: the fill that produced it must stay.
    assert not intentions.restated_by("The name field holds Alice")


def test_a_rewrite_answer_is_cleaned_to_the_thought_alone() -> None:
    framed = ("Based on the remaining information and the overall context of the agent's "
              "goal, the new thought for the next step could be:\n\n\"Move on to the next "
              "page with the 'Nb' checkbox selected.\"")
    assert clean_thought(framed) == "Move on to the next page with the 'Nb' checkbox selected."
    assert clean_thought("<think>The form is open.</think><action>click('8')</action>") == \
        "The form is open."
    assert clean_thought('"Type the name."') == "Type the name."
    # a quotation inside a real thought stays
    assert clean_thought('The dialog says: "Delete the file?" so I press OK.') == \
        'The dialog says: "Delete the file?" so I press OK.'
    assert clean_thought("  <think> </think>") is None


def test_the_vote_needs_two_identical_runs() -> None:
    a, b = ("A1", "A3"), ("A3",)
    assert required_agreement(1) == 1 and required_agreement(3) == 2
    assert required_agreement(5) == 3
    assert tally([a], 3) is None
    assert tally([a, a], 3).accepted == a  # type: ignore[union-attr]
    assert tally([a, b], 3) is None
    assert tally([a, b, a], 3).accepted == a  # type: ignore[union-attr]
    discarded = tally([a, b, None], 3)
    assert discarded is not None and discarded.accepted is None and discarded.failed == 1
    assert tally([None, None], 3).accepted is None  # type: ignore[union-attr]
    assert tally([a], 1).accepted == a  # type: ignore[union-attr]


def test_span_perplexity_counts_only_the_thought_tokens() -> None:
    tokens = [TokenLogprob("<think>", -5.0), TokenLogprob("Hi", -1.0),
              TokenLogprob(" there", -3.0), TokenLogprob("</think>", -7.0)]
    assert span_perplexity(tokens, 7, 15) == pytest.approx(math.exp(2.0))
    assert span_perplexity(tokens, 40, 50) is None


@pytest.mark.parametrize("text", ['plain', 'a "quote" and \\ back', "two\nlines\tand\x01"])
def test_a_literal_grammar_round_trips(text: str) -> None:
    assert literal_of_grammar(gbnf_literal(text)) == text
    assert re.match(r'^root ::= ".*"$', gbnf_literal(text), re.DOTALL)


async def test_a_call_with_logprobs_returns_the_tokens() -> None:
    with ScriptedChatServer(lambda m: "Hello there",
                            logprobs=lambda m, t: [(w, -0.5) for w in word_tokens(t)]) as llm:
        client = ChatClient(EndpointSettings(base_url=llm.base_url, model="m"))
        call, logprobs = await call_model_with_logprobs(client, [{"role": "user", "content": "Hi"}])
        plain = await call_model(client, [{"role": "user", "content": "Hi"}])
        await client.close()
    assert call.response == "Hello there" and plain.response == "Hello there"
    assert logprobs == [TokenLogprob("Hello", -0.5), TokenLogprob(" there", -0.5)]
    assert llm.requests[0]["logprobs"] is True and "logprobs" not in llm.requests[1]


def test_prune_rejects_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prune", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
    assert "no such run folder" in capsys.readouterr().err
    assert main(["prune", str(tmp_path), "--out", str(tmp_path / "o"),
                 "--pass-rate", "0.5"]) == 2
    assert "LOW:HIGH" in capsys.readouterr().err


def test_nothing_to_prune_starts_no_model(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_episode(run, "failed", "signup", GOALS["signup"], DETOUR[:2], success=False)
    # No --base-url: a model would have to be started; with nothing to prune it is not.
    # An empty dataset is no result (exit 7), but its files say why.
    assert main(["prune", str(run), "--out", str(tmp_path / "d")]) == 7
    stats = json.loads((tmp_path / "d" / "stats.json").read_text())
    assert stats["trajectories_in"] == 0 and read_jsonl(tmp_path / "d" / "pruned.jsonl") == []
    [skipped] = read_jsonl(tmp_path / "d" / "trajectories.jsonl")
    assert skipped["reason"] == "episode did not succeed"


def test_a_single_step_episode_is_kept_whole_without_asking_a_model(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_episode(run, "one", "ok", GOALS["ok"], DIRECT[:1])

    def script(messages: list[dict[str, Any]]) -> str:
        raise AssertionError("no model call expected")

    out = tmp_path / "dataset"
    with ScriptedChatServer(script) as llm:
        assert prune(run, out, llm) == 0
    assert llm.requests == []
    [line] = read_jsonl(out / "hybrid.jsonl")
    assert line["metadata"]["kept_steps"] == [0] and line["metadata"]["source"] == "unpruned"
    [report] = read_jsonl(out / "trajectories.jsonl")
    assert report["reason"] == "a single step: nothing to prune"


def test_each_verdict_is_on_disk_before_the_next_trajectory_starts(run_dir: Path,
                                                                   tmp_path: Path) -> None:
    out = tmp_path / "dataset"
    extractor = Extractor()
    seen_while_pruning_signup: list[str] = []

    def script(messages: list[dict[str, Any]]) -> str:
        if GOALS["signup"] in messages[0]["content"] and not seen_while_pruning_signup:
            log = out / "trajectories.jsonl"
            seen_while_pruning_signup.append(log.read_text() if log.exists() else "")
        return extractor(messages)

    with ScriptedChatServer(script, logprobs=base_model_logprobs, follow_grammar=True) as llm:
        assert prune(run_dir, out, llm, "--concurrency", "1") == 0
    # phase 1 asks about all steps at once, so several requests may take the first look
    assert seen_while_pruning_signup and len(set(seen_while_pruning_signup)) == 1
    [first] = [json.loads(line) for line in seen_while_pruning_signup[0].splitlines()]
    assert first["task_id"] == "ok" and first["status"] == "unpruned"
    keys = [r.get("key", r.get("episode")) for r in read_jsonl(out / "trajectories.jsonl")]
    assert len(keys) == len(set(keys)) == 3  # ok, signup, and the skipped failed episode


def test_a_damaged_trace_is_left_out_with_its_reason_never_silently(run_dir: Path) -> None:
    """A garbage line mid-file would hide a step: the trajectory would teach a history
    that never happened, so the episode is left out, said why, and warned about."""
    steps = run_dir / "signup" / "steps.jsonl"
    first, *rest = steps.read_bytes().splitlines(keepends=True)
    steps.write_bytes(first + b"\xff{garbage\n" + b"".join(rest))
    with structlog.testing.capture_logs() as logs:
        reason = read_trajectory(run_dir, run_dir / "signup")
    assert reason == "damaged trace: steps.jsonl line 2 skipped: not UTF-8 (byte 0)"
    assert any(e["event"] == "episode left out: damaged trace" for e in logs)
