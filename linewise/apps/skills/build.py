"""``linewise skills build`` and ``show``: from run folders and pruned datasets to a
folder of skill files, and what a folder holds."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from linewise.apps.skills.induce import induce_skills
from linewise.errors import ProgramError
from linewise.runtime.replay.program import Program, load_programs
from linewise.runtime.replay.skill import Skill, SkillLibrary, write_skill


def programs_of(sources: Sequence[Path]) -> list[Program]:
    """The solved programs of every source; an episode found both whole (a run folder)
    and pruned (a dataset of ``linewise prune``) is taken pruned."""
    chosen: dict[str, Program] = {}
    for source in sources:
        for program in load_programs(source):
            known = chosen.get(program.source)
            if known is None or len(program.steps) < len(known.steps):
                chosen[program.source] = program
    return list(chosen.values())


def build_skills(sources: Sequence[Path], out: Path) -> list[Skill]:
    """Induce the skills of ``sources`` and write them into ``out`` (made anew).

    Raises:
        ProgramError: no source holds a solved episode, or none gives a skill.
    """
    skills = induce_skills(programs_of(sources))
    if not skills:
        raise ProgramError(", ".join(map(str, sources)), "gives no skill")
    if out.exists():
        if not out.is_dir() or any(p.suffix != ".json" for p in out.iterdir()):
            raise ProgramError(str(out), "exists and is not a folder of skills")
        shutil.rmtree(out)
    for skill in skills:
        write_skill(skill, out)
    return skills


def describe_skill(skill: Skill) -> str:
    """``login_user(username, password): Enter the username {username}… [3 episodes]``."""
    parameters = ", ".join(p.name for p in skill.parameters)
    return (f"{skill.name}({parameters}): {skill.doc}  "
            f"[{len(skill.steps)} steps, {len(skill.provenance)} episodes]")


def show_skills(directory: Path, goal: str | None = None) -> list[str]:
    """One line per skill of ``directory``; with ``goal``, those whose goal template
    fits it, each with the arguments it would take."""
    library = SkillLibrary.load(directory)
    lines = []
    for skill in library.skills.values():
        if goal is None:
            lines.append(describe_skill(skill))
        elif (arguments := skill.arguments_from(goal)) is not None:
            lines.append(f"{describe_skill(skill)}\n    arguments: {arguments}")
    return lines
