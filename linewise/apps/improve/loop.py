"""The improve loop: N rounds of train bench -> prune -> memory -> test bench.

    DIR/round-0/test/         the test seeds without a memory (the baseline; optional)
    DIR/round-R/train/        a bench on the training seeds, with the memory of round R-1
    DIR/round-R/pruned/       ``linewise prune`` of that bench (optional)
    DIR/round-R/retriever/    with --retrain-retriever: a retriever trained on every
                              training bench's solved steps so far; the round's test
                              benches and the next round's training bench use it
    DIR/round-R/memory.jsonl  every training round so far, as memory entries
    DIR/round-R/skills/       with --skills-arm: skills induced from every training bench
                              so far (its pruned trajectories where pruned)
    DIR/round-R/test-skills/  a bench on the test seeds, with that memory and the skills
                              (before the memory-only bench)
    DIR/round-R/test/         a bench on the test seeds, with that memory
    DIR/replay-cache/         the programs of the training tasks solved so far: a later
                              round's training bench replays them (no model call), and
                              asks the model only for the tasks not yet solved
    DIR/improve.json          the report (ImproveReport); improve.md its table

Progress (``ProgressDisplay``): one tally of the episodes of every bench of the loop,
done out of planned, labelled with the round and phase (``round 1/2 train``), with an
ETA at the pace so far; the pruner's tally of trajectories while it prunes; and a note
as each phase starts and each round ends, with its success rates.

Running the same command again continues a loop that stopped (interrupted, a crash,
the machine restarted): each bench runs only the episodes its folder lacks (a finished
bench runs none), a round's pruning is kept when its training bench ran nothing new,
and the memory, the skills and the report are rebuilt from the folders, as they are
the same whenever the benches are.

Training and test seeds must be disjoint, and every test bench refuses a memory that
holds one of its episodes (``apps/memory/load.check_memory_leak``); a training bench
runs with entries of its own seeds from earlier rounds (an episode never sees its own
task and seed), and says so in its bench.json.
"""

from __future__ import annotations

from pathlib import Path

import structlog

from linewise.agent.experience.store import write_memory
from linewise.agent.text.embedders import Embedder
from linewise.apps.bench.driver import run_bench
from linewise.apps.bench.options import BenchOptions
from linewise.apps.bench.outage import OutageNotice
from linewise.apps.bench.plan import EpisodeSpec, default_id, expand
from linewise.apps.bench.results import EpisodeResult
from linewise.apps.improve.options import SET_BY_THE_LOOP, ImproveOptions, SeedRange
from linewise.apps.improve.report import (
    REPORT_FILE,
    TABLE_FILE,
    ImproveReport,
    RoundResult,
    Success,
    improve_table,
    success_cell,
)
from linewise.apps.improve.retrain import (
    WEIGHTS_DIR,
    Retrained,
    retrain_retriever,
    targets_shown,
)
from linewise.apps.memory.build import build_memory
from linewise.apps.progress import QUIET, ProgressDisplay, Tally
from linewise.apps.pruning.options import PruneOptions
from linewise.apps.pruning.pipeline import run_prune
from linewise.apps.skills.build import build_skills
from linewise.errors import ConfigError, ProgramError
from linewise.runtime.browser.chromium import BrowserConfig
from linewise.runtime.tasks.schema import AnyTask, BrowserGymTask, MiniWoBTask
from linewise.settings import LinewiseSettings

log = structlog.get_logger(__name__)

def seeded_specs(tasks: list[AnyTask], seeds: SeedRange, filter_name: str) -> list[EpisodeSpec]:
    """The bench episodes of ``tasks`` on ``seeds`` (the bench plan's own expansion)."""
    moved: list[AnyTask] = []
    for task in tasks:
        if not isinstance(task, MiniWoBTask | BrowserGymTask):
            raise ConfigError(f"task {task.id}: the improve loop needs seeded tasks "
                              "(miniwob or browsergym), whose seeds can be kept apart")
        derived = task.id == default_id(task, task.seed)
        update: dict[str, object] = {"seed": seeds.first}
        if derived:
            update["id"] = default_id(task, seeds.first)
        moved.append(task.model_copy(update=update))
    return expand(moved, [filter_name], seeds.count)


class ImproveLoop:
    """One improve run (see the module's docstring)."""

    def __init__(
        self,
        tasks: list[AnyTask],
        settings: LinewiseSettings,
        out_dir: Path,
        options: ImproveOptions,
        *,
        browser_config: BrowserConfig,
        bench_options: BenchOptions,
        prune_options: PruneOptions | None = None,
        embedder: Embedder | None = None,
        progress: ProgressDisplay = QUIET,
    ) -> None:
        if options.train_seeds.overlaps(options.test_seeds):
            raise ConfigError(f"training seeds {options.train_seeds} and test seeds "
                              f"{options.test_seeds} overlap: the test would see its answers")
        for name, what in SET_BY_THE_LOOP.items():
            if getattr(settings.agent, name) is not None:
                raise ConfigError(f"the improve loop makes its own {what}: leave agent.{name} "
                                  f"unset (LINEWISE_AGENT__{name.upper()})")
        self.settings = settings
        self.out_dir = out_dir
        self.options = options
        self.browser_config = browser_config
        self.bench_options = bench_options
        self.prune_options = prune_options or PruneOptions()
        self.embedder = embedder
        self.progress = progress
        self.tally: Tally | None = None
        self._ran = 0
        """The episodes the last bench ran (0 for a bench an earlier run finished)."""
        self.retriever: Path | None = settings.filter.retriever_weights
        """The retriever weights the benches run with: the caller's, then the last
        round's retrained ones (``--retrain-retriever``)."""
        name = settings.filter.name
        self.train_specs = seeded_specs(tasks, options.train_seeds, name)
        self.test_specs = seeded_specs(tasks, options.test_seeds, name)
        self.report = ImproveReport(
            tasks=list(dict.fromkeys(s.base_task for s in self.train_specs)),
            train_seeds=str(options.train_seeds),
            test_seeds=str(options.test_seeds), filter=name, prune=options.prune)

    def planned_episodes(self) -> int:
        """Every episode of every bench the loop will run (a test bench with skills only
        when skills are induced: see ``_skills_arm``)."""
        train, test = len(self.train_specs), len(self.test_specs)
        per_round = train + test + (test if self.options.skills else 0)
        return (test if self.options.baseline else 0) + self.options.rounds * per_round

    async def run(self) -> ImproveReport:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.tally = self.progress.tally("improve", "episodes", self.planned_episodes())
        self.progress.note(
            "improve started", f"improve: {self.options.rounds} round(s), "
            f"{self.tally.total} episodes planned, in {self.out_dir}",
            rounds=self.options.rounds, planned=self.tally.total, out=str(self.out_dir))
        try:
            return await self._rounds()
        finally:
            self.tally.close()

    async def _rounds(self) -> ImproveReport:
        if self.options.baseline:
            test = await self._bench(self.test_specs, self._round_dir(0) / "test", None,
                                     step="round 0 test (no memory)")
            self._record(RoundResult(round=0, test=test))
        memory: Path | None = None
        train_dirs: list[Path] = []
        pruned_dirs: list[Path] = []
        for number in range(1, self.options.rounds + 1):
            folder = self._round_dir(number)
            step = f"round {number}/{self.options.rounds}"
            train = await self._bench(self.train_specs, folder / "train", memory, train=True,
                                      step=f"{step} train")
            train_dirs.append(folder / "train")
            if self.options.prune:
                pruned = folder / "pruned"
                if self._ran == 0 and (pruned / "stats.json").is_file():
                    self._phase(f"{step} prune", f"kept {pruned}: its training bench "
                                "ran no new episode")
                else:
                    self._phase(f"{step} prune", f"pruning {folder / 'train'}")
                    await run_prune([folder / "train"], pruned, self.settings,
                                    self.prune_options, progress=self.progress)
                pruned_dirs.append(pruned)
            retrained = None
            if self.options.retrain_retriever:
                retrained = await self._retrain(folder, train_dirs, step)
                if retrained.weights is not None:
                    self.retriever = Path(retrained.weights)
            entries, built = await build_memory(train_dirs, pruned_dirs, embedder=self.embedder)
            memory = folder / "memory.jsonl"
            write_memory(memory, entries)
            if built.embedding_note and built.embedding_note not in self.report.notes:
                self.report.notes.append(built.embedding_note)
            self._phase(f"{step} memory", f"{built.entries} entries ({built.from_pruner} "
                        f"from the pruner) in {memory}", entries=built.entries,
                        from_pruner=built.from_pruner)
            # The skills arm runs first: it is the figure the arm is asked for, and a loop
            # stopped part-way then holds it, while the memory arm is the comparison.
            skills, with_skills = None, None
            if self.options.skills:
                skills, with_skills = await self._skills_arm(folder, train_dirs, pruned_dirs,
                                                             memory, step)
            test = await self._bench(self.test_specs, folder / "test", memory,
                                     step=f"{step} test")
            self._record(RoundResult(
                round=number, memory_entries=built.entries,
                memory_from_pruner=built.from_pruner, train=train, test=test,
                memory=str(memory), skills=skills, test_skills=with_skills,
                retriever=None if self.retriever is None else str(self.retriever),
                retriever_examples=None if retrained is None else retrained.examples,
                test_targets_shown=(None if retrained is None
                                    else targets_shown(folder / "test"))))
        return self.report

    def _phase(self, step: str, doing: str, **fields: object) -> None:
        """A phase starts: the tally says which, and a note what it does."""
        assert self.tally is not None
        self.tally.relabel(step)
        self.progress.note("improve phase", f"{step}: {doing}", step=step, **fields)

    async def _skills_arm(self, folder: Path, train_dirs: list[Path],
                          pruned_dirs: list[Path], memory: Path,
                          step: str) -> tuple[int, Success | None]:
        """Induce skills from the training benches (pruned trajectories first) and bench
        the test seeds with them; no skill, no bench."""
        try:
            skills = build_skills([*pruned_dirs, *train_dirs], folder / "skills")
        except ProgramError as exc:
            log.info("no skill induced", round=folder.name, reason=str(exc))
            assert self.tally is not None
            self.tally.plan(self.tally.total - len(self.test_specs))  # that bench is off
            return 0, None
        return len(skills), await self._bench(self.test_specs, folder / "test-skills", memory,
                                              skills=folder / "skills",
                                              step=f"{step} test with skills")

    async def _retrain(self, folder: Path, train_dirs: list[Path], step: str) -> Retrained:
        """The round's retriever (``apps/improve/retrain.py``), kept from an earlier run
        when the training bench ran nothing new."""
        out = folder / WEIGHTS_DIR
        self._phase(f"{step} retriever", f"training on the solved steps of {len(train_dirs)} "
                    f"training bench(es) into {out}")
        retrained = await retrain_retriever(
            train_dirs, out, keep=self._ran == 0,
            command=["linewise", "improve", str(self.out_dir)])
        if retrained.weights is None:
            note = (f"{folder.name}: the retriever was not retrained ({retrained.examples} "
                    "examples from solved steps; two are needed)")
            if note not in self.report.notes:
                self.report.notes.append(note)
        return retrained

    def _round_dir(self, number: int) -> Path:
        return self.out_dir / f"round-{number}"

    async def _bench(self, specs: list[EpisodeSpec], folder: Path, memory: Path | None,
                     *, step: str, train: bool = False, skills: Path | None = None) -> Success:
        cache = (self.out_dir / "replay-cache"
                 if train and self.options.replay_cache else None)
        chosen = {"memory": memory, "skills": skills, "replay_cache": cache}
        assert chosen.keys() == SET_BY_THE_LOOP.keys()
        update: dict[str, object] = {"agent": self.settings.agent.model_copy(update=chosen)}
        if self.retriever is not None:
            update["filter"] = self.settings.filter.model_copy(
                update={"retriever_weights": self.retriever})
        settings = self.settings.model_copy(update=update)
        self._phase(step, f"bench of {len(specs)} episodes in {folder}",
                    episodes=len(specs), folder=str(folder))
        assert self.tally is not None
        outcome = await run_bench(
            specs, settings, self.browser_config, folder, self.bench_options,
            argv=["linewise", "improve", str(self.out_dir)],
            allow_memory_overlap=train, progress=_BenchInLoop(self.tally, self.progress),
        )
        self._ran = outcome.ran + outcome.recovered + outcome.retried
        mine = {s.key for s in specs}
        return Success.of([r for r in outcome.results if r.key in mine])

    def _record(self, row: RoundResult) -> None:
        """Add a round and rewrite the report, so a loop cut short keeps its rounds."""
        self.report.rounds.append(row)
        (self.out_dir / REPORT_FILE).write_text(self.report.model_dump_json(indent=2),
                                                encoding="utf-8")
        (self.out_dir / TABLE_FILE).write_text(improve_table(self.report), encoding="utf-8")
        name = "round 0" if row.round == 0 else f"round {row.round}/{self.options.rounds}"
        rates = [f"{what} {success_cell(success)}" for what, success in (
            ("train", row.train), ("test", row.test), ("test with skills", row.test_skills))
            if success is not None]
        self.progress.note("improve round done",
                           f"{name} done: {'; '.join(rates)} (success % ± SE)",
                           round=row.round, test=row.test.rate,
                           train=None if row.train is None else row.train.rate,
                           entries=row.memory_entries)


def ending(result: EpisodeResult) -> str:
    """How an episode ended, for the loop's tally: succeeded or failed (the agent's),
    else its outcome (replayed, infrastructure…)."""
    if result.outcome == "agent":
        return "succeeded" if result.success else "failed"
    return result.outcome


class _BenchInLoop:
    """A bench of the loop, counted on the loop's tally (the bench's ``Progress``)."""

    def __init__(self, tally: Tally, display: ProgressDisplay) -> None:
        self.tally = tally
        self.display = display

    def start(self, total: int, already_done: int) -> None:
        for _ in range(already_done):
            self.tally.advance("already done")

    def episode_started(self, label: str) -> None:
        pass

    def episode_finished(self, result: EpisodeResult) -> None:
        self.tally.advance(ending(result))

    def episode_retried(self, result: EpisodeResult) -> None:
        pass  # it runs again, and is counted when it ends

    def endpoint_down(self, notice: OutageNotice | None) -> None:
        self.display.note("model endpoint", notice.text() if notice is not None
                          else "model endpoint up again")

    def close(self) -> None:
        pass

