"""The experience memory: built from real trace folders (and a pruner's verdicts), read
back from its JSONL file, retrieved for a running episode and fitted to its budget."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from linewise.agent.experience.load import check_memory_leak, memory_for
from linewise.agent.experience.retrieve import ExperienceMemory
from linewise.agent.experience.store import (
    MemoryEntry,
    MemoryStep,
    TaskKey,
    read_memory,
    task_key,
    write_memory,
)
from linewise.agent.text.embedders import MiniLMEmbedder
from linewise.apps.bench.driver import run_bench
from linewise.apps.bench.local import BenchOptions
from linewise.apps.bench.plan import expand
from linewise.apps.memory.build import build_memory
from linewise.apps.pruning.dialogue import PrunedStep
from linewise.apps.pruning.export import TRAJECTORIES_FILE, TrajectoryOutcome
from linewise.cli.main import main
from linewise.errors import ConfigError
from linewise.records import EpisodeSummary, StepRecord
from linewise.runtime.browser.chromium import BrowserConfig
from linewise.runtime.run import run
from linewise.runtime.tasks.schema import MiniWoBTask
from linewise.runtime.trace import EpisodeTraceWriter, read_steps
from linewise.settings import AgentSettings, LinewiseSettings
from linewise.testing import FunctionModel, miniwob_solver
from linewise.tokens import count_tokens

PAGE = "\n".join([
    "[1] RootWebArea 'Form'",
    "\t[2] heading 'Sign up'",
    "\t[3] StaticText 'Fill in the form below'",
    "\t[4] textbox 'Name'",
    "\t[5] textbox 'Email'",
    "\t[6] checkbox 'Subscribe'",
    "\t[7] StaticText 'We never share your email'",
    "\t[8] link 'Privacy policy'",
    "\t[9] button 'Submit'",
    "\t[10] StaticText 'Footer text far away'",
])


def _entry(task: str, seed: int | None, goal: str, observation: str = "[4] button 'OK'",
           steps: int = 1) -> MemoryEntry:
    task_id = f"{task}.seed{seed}" if seed is not None else task
    return MemoryEntry(
        id=f"{task_id}/ep", task_id=task_id, task=task, seed=seed, kind="miniwob", goal=goal,
        steps=[MemoryStep(index=i, observation=observation, think=f"step {i} of {goal}",
                          action="click('4')") for i in range(steps)])


def _episode(run_dir: Path, name: str, goal: str, success: bool,
             steps: list[tuple[str, str | None, str | None]],
             pages: list[str] | None = None) -> Path:
    """An episode folder as the loop writes it: (action, action_error, thought) per step,
    on ``pages`` (by default a page that every step changes)."""
    folder = run_dir / name
    writer = EpisodeTraceWriter(folder)
    summary = EpisodeSummary(episode_id=f"id-{name}", task_id=name, goal=goal)
    writer.start(summary)
    for index, (action, error, think) in enumerate(steps):
        page = pages[index] if pages else f"{PAGE}\n\t[11] StaticText 'step {index}'"
        axtree = "\n".join(f"{n}|{line}" for n, line in enumerate(page.splitlines(), 1))
        writer.write_step(StepRecord(
            episode_id=summary.episode_id, task_id=name, index=index, url="http://form.test/",
            axtree=axtree, observation=page, think=think, action=action, action_error=error))
    summary.status, summary.termination = "finished", "task_done"
    summary.success, summary.n_steps = success, len(steps)
    writer.write_summary(summary)
    return folder


def test_task_keys_come_from_ids_and_given_seeds() -> None:
    assert task_key("miniwob.click-test.seed3") == TaskKey("miniwob.click-test", 3)
    assert task_key("my-task", 4) == TaskKey("my-task", 4)
    assert task_key("my-task") == TaskKey("my-task", None)


async def test_retrieval_never_returns_the_running_task_and_seed() -> None:
    goal = 'Click on the "{}" button.'
    entries = [_entry("miniwob.click-button", seed, goal.format(word))
               for seed, word in enumerate(["Yes", "No", "Cancel", "Ok"])]
    entries += [_entry("miniwob.click-test", 0, "Click the button."),
                _entry("miniwob.click-button-sequence", None, "Click button ONE, then TWO.")]
    memory = ExperienceMemory(entries, k=len(entries), budget_tokens=5000)
    for running in entries:
        # The running episode's own goal: its entry would be the best match of all.
        shown = (await memory.examples(running.task_id, running.goal, "")).shown
        assert running.id not in shown.entries
        assert len(shown.entries) == len(entries) - 1
    # A seed the memory does not know cannot rule an entry out by seed; a task whose
    # entry has no seed is ruled out whatever the running seed.
    shown = (await memory.examples("miniwob.click-button-sequence.seed7", "x", "")).shown
    assert "miniwob.click-button-sequence/ep" not in shown.entries
    shown = (await memory.examples("miniwob.click-button.seed9", goal.format("No"), "")).shown
    assert shown.entries[0] == "miniwob.click-button.seed1/ep"
    assert shown.retrieval == "lexical" and shown.note == "no embedder configured"


async def test_the_running_tasks_entries_of_other_seeds_come_first() -> None:
    # click-widget seed 10 was shown enter-text-dynamic's, simple-arithmetic's and
    # click-test's entries, whose words its page shared, and not click-widget seed 0's
    widget = _entry("miniwob.click-widget", 0, 'Click on a "checkbox" widget.',
                    observation="[5] checkbox ''")
    others = [_entry("miniwob.enter-text-dynamic", 0,
                     'Enter "LO4eN" into the textbox and press Submit.',
                     observation="[16] textbox ''\n[17] button 'Submit'"),
              _entry("miniwob.click-test", 0, "Click the Submit button.",
                     observation="[14] button 'Submit'")]
    memory = ExperienceMemory([*others, widget], k=2, budget_tokens=5000)
    goal, page = 'Click on a "textbox" widget.', "[16] textbox ''\n[17] button 'Submit'"
    shown = (await memory.examples("miniwob.click-widget.seed10", goal, page)).shown
    assert shown.entries[0] == widget.id and len(shown.entries) == 2
    # the others keep their order by similarity behind it
    alone = ExperienceMemory(others, k=2, budget_tokens=5000)
    ranked = (await alone.examples("miniwob.click-widget.seed10", goal, page)).shown.entries
    assert shown.entries[1] == ranked[0]


@pytest.mark.parametrize(("budget", "fitting"), [(100, 0), (300, 1), (700, 3), (4000, 6)])
async def test_examples_fit_their_budget(budget: int, fitting: int) -> None:
    long_page = "\n".join(f"[{n}] link 'Article number {n} about gardening and bees'"
                          for n in range(12))
    entries = [_entry("miniwob.social-media", seed, f"Like the post number {seed} about bees.",
                      observation=long_page, steps=4) for seed in range(6)]
    memory = ExperienceMemory(entries, k=6, budget_tokens=budget)
    examples = await memory.examples("miniwob.social-media.seed99", "Like the post about bees",
                                     long_page)
    assert count_tokens(examples.text) <= budget
    assert examples.shown.tokens == (count_tokens(examples.text) if examples.text else 0)
    # Each example takes about 190 tokens (an element line, a thought, an action per step):
    # the budget, not k, decides how many are shown.
    assert len(examples.shown.entries) == fitting


async def test_build_keeps_only_successful_episodes_and_uses_the_pruned_trajectory(
    tmp_path: Path,
) -> None:
    runs = tmp_path / "run"
    _episode(runs, "miniwob.form.seed1", "Sign up as Alice.", True, [
        ("click('8')", "element is not visible", "Read the policy first."),
        ("noop()", None, "Wait."),
        ("fill('4', 'Alice')", None, "Type the name."),
        ("click('9')", None, "Submit."),
    ])
    _episode(runs, "miniwob.form.seed2", "Sign up as Bob.", False, [
        ("fill('4', 'Bob')", None, "Type the name."),
    ])
    pruned = _episode(runs, "miniwob.form.seed3", "Sign up as Carol.", True, [
        ("click('8')", None, "Detour to the policy."),
        ("fill('4', 'Carol')", None, "Back on the form after the detour, type the name."),
        ("click('9')", None, "Submit."),
    ])
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    verdict = TrajectoryOutcome(
        key="k", run=str(runs), episode=pruned.name, task_id="miniwob.form.seed3",
        status="pruned", steps=3, kept_steps=[1, 2], kept=[
            PrunedStep(index=1, think="Type the name.", action="fill('4', 'Carol')",
                       rewritten=True),
            PrunedStep(index=2, think="Submit.", action="click('9')")])
    (dataset / TRAJECTORIES_FILE).write_text(verdict.model_dump_json() + "\n")

    entries, report = await build_memory([runs], [dataset])
    write_memory(tmp_path / "memory.jsonl", entries)
    by_seed = {e.seed: e for e in read_memory(tmp_path / "memory.jsonl")}

    assert set(by_seed) == {1, 3} and report.skipped == {"did not succeed": 1}
    plain, from_pruner = by_seed[1], by_seed[3]
    assert not plain.pruned and [s.action for s in plain.steps] == [
        "fill('4', 'Alice')", "click('9')"]  # the failed click and the noop are gone
    assert from_pruner.pruned and report.from_pruner == 1
    assert [(s.index, s.think, s.action) for s in from_pruner.steps] == [
        (1, "Type the name.", "fill('4', 'Carol')"), (2, "Submit.", "click('9')")]
    # the acted element's own line, and none of the page around it
    assert [s.observation for s in from_pruner.steps] == [
        "[4] textbox 'Name'", "[9] button 'Submit'"]
    assert from_pruner.site == "http://form.test/"
    assert from_pruner.task == "miniwob.form" and from_pruner.kind == "miniwob"
    assert report.embedding_note == "no embedder: entries are lexical only"


async def test_build_leaves_out_steps_after_which_the_page_was_the_same(
    tmp_path: Path,
) -> None:
    # the 1.5B model's solved click-test: focus('14') twice, then the click that ended it
    button = "[1] RootWebArea 'Click Test'\n\t[14] button 'Click Me!'"
    focused = button + ", focused"  # focus is no change of the page
    filled = PAGE.replace("textbox 'Name'", "textbox 'Name' value='Alice'")
    _episode(tmp_path, "miniwob.click-test.seed0", "Click the button.", True, [
        ("focus('14')", None, "Focus it."), ("focus('14')", None, "Focus it."),
        ("click('14')", None, "Click it."),
    ], pages=[button, focused, focused])
    _episode(tmp_path, "miniwob.form.seed0", "Sign up as Alice.", True, [
        ("fill('4', 'Alice')", None, "Type."), ("fill('4', 'Alice')", None, "Type."),
        ("click('9')", None, "Submit."),
    ], pages=[PAGE, filled, filled])
    entries, _ = await build_memory([tmp_path])
    assert {e.task: [s.action for s in e.steps] for e in entries} == {
        "miniwob.click-test": ["click('14')"],  # the last step ends the task: kept
        "miniwob.form": ["fill('4', 'Alice')", "click('9')"]}


def test_a_memory_file_of_another_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "memory.jsonl"
    write_memory(path, [_entry("miniwob.click-test", 1, "Click the button.")])
    path.write_text(path.read_text().replace('"version":1', '"version":99'))
    with pytest.raises(ConfigError, match="version 99"):
        read_memory(path)


async def test_a_memory_built_from_the_test_seeds_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "memory.jsonl"
    write_memory(path, [_entry("miniwob.click-test", 5, "Click the button."),
                        _entry("miniwob.click-button", 1, 'Click on the "Ok" button.')])
    settings = LinewiseSettings(agent=AgentSettings(memory=path))
    specs = expand([MiniWoBTask(miniwob="click-test", seed=4),
                    MiniWoBTask(miniwob="click-button", seed=4)], ["none"], 2)  # seeds 4, 5
    with pytest.raises(ConfigError, match="click-test seed 5"):
        await run_bench(specs, settings, BrowserConfig(), tmp_path / "bench", BenchOptions(),
                        argv=["test"])
    assert not (tmp_path / "bench" / "results.jsonl").exists()  # refused before any episode
    keys = [task_key(s.task.id, s.seed) for s in specs]
    assert check_memory_leak(settings, keys, allow=True) == [TaskKey("miniwob.click-test", 5)]
    clean = LinewiseSettings(agent=AgentSettings(memory=path))
    assert check_memory_leak(clean, [TaskKey("miniwob.click-test", 6)]) == []
    assert memory_for(LinewiseSettings()) is None


async def test_the_python_api_shows_the_memory_to_the_model_and_records_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "LINEWISE_")):
            monkeypatch.delenv(name)
    path = tmp_path / "memory.jsonl"
    write_memory(path, [
        _entry("miniwob.click-test", 2, "Click the button.", "[4] button 'Click Me!'"),
        _entry("miniwob.click-test", 1, "Click the button.", "[4] button 'Mine!'"),
        _entry("miniwob.enter-text", 0, 'Enter "x" into the text field.', "[3] textbox"),
    ])
    model = FunctionModel(lambda messages, info: miniwob_solver(messages))
    settings = LinewiseSettings(screenshots=False, filter={"name": "none"},
                                agent=AgentSettings(memory_k=1))
    [summary] = await run(MiniWoBTask(miniwob="click-test", seed=1, max_steps=2), model=model,
                          settings=settings, out_dir=tmp_path / "run", memory=path)
    assert summary.success
    user = model.requests[0].messages[1]["content"]
    assert user.startswith("# Worked examples") and "'Click Me!'" in user
    assert "'Mine!'" not in user  # the entry of the running task and seed
    [step] = read_steps(tmp_path / "run" / "miniwob.click-test.seed1")
    assert step.memory is not None and step.memory.entries == ["miniwob.click-test.seed2/ep"]
    assert step.memory.tokens == count_tokens(user.split("\n# Goal", 1)[0])


def test_memory_build_and_show_commands(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "run"
    _episode(runs, "miniwob.form.seed1", "Sign up as Alice.", True,
             [("fill('4', 'Alice')", None, "Type the name."), ("click('9')", None, "Submit.")])
    _episode(runs, "miniwob.form.seed2", "Sign up as Bob.", False, [("noop()", None, None)])
    out = tmp_path / "memory.jsonl"
    assert main(["memory", "build", str(runs), "--out", str(out), "--no-embed"]) == 0
    assert "1 entries (0 from the pruner) from 1 successful of 2 episodes" in (
        capsys.readouterr().out)
    assert main(["memory", "show", str(out)]) == 0
    assert capsys.readouterr().out.startswith(
        "miniwob.form.seed1/id-miniwob.form.seed1\tminiwob.form\tseed 1\t2 steps")
    assert main(["memory", "show", str(out), "--goal", "Sign up as Dan",
                 "--task-id", "miniwob.form.seed5"]) == 0
    shown = capsys.readouterr().out
    assert "## Example 1\nTask: Sign up as Alice." in shown and "action: click('9')" in shown


async def test_the_embedder_finds_a_paraphrase_that_shares_no_word(tmp_path: Path) -> None:
    """Built with the offline MiniLM embedder: an entry that shares no word with the goal
    is found by meaning, and the record says the ranking used the embedder."""
    runs = tmp_path / "run"
    _episode(runs, "miniwob.enter-text.seed0", "Type your favourite colour into the field.",
             True, [("fill('4', 'blue')", None, "Type it.")])
    _episode(runs, "miniwob.click-dialog.seed0", "Close the dialog box by pressing the x.",
             True, [("click('9')", None, "Close it.")])
    embedder = MiniLMEmbedder()
    entries, report = await build_memory([runs], embedder=embedder)
    assert report.embedder == embedder.name and all(e.embedding for e in entries)
    goal = "Shut the popup window."
    with_vectors = await ExperienceMemory(entries, k=1, embedder=embedder).examples(
        "miniwob.other.seed0", goal, "")
    assert with_vectors.shown.entries == [
        "miniwob.click-dialog.seed0/id-miniwob.click-dialog.seed0"]
    assert with_vectors.shown.retrieval == "lexical+embedding" and with_vectors.shown.note is None
    lexical = await ExperienceMemory(entries, k=1).examples("miniwob.other.seed0", goal, "")
    assert lexical.shown.retrieval == "lexical"
