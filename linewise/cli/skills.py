"""``linewise skills build`` and ``linewise skills show``: skills for ``--skills DIR``.

    linewise skills build SOURCE... --out DIR
    linewise skills show DIR [--goal TEXT]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from linewise.cli.commands import summary
from linewise.cli.flags import add_log_level_flag


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    skills = sub.add_parser("skills", help=summary("skills"))
    actions = skills.add_subparsers(dest="skills_command", required=True,
                                    help="build: induce skills; show: list a folder's skills")
    build = actions.add_parser(
        "build", help="solved episodes -> one skill per task template",
        description="Group the solved episodes by task template; the goal's values that "
        "the actions reuse (and that vary between episodes) become parameters; the steps "
        "most episodes agree on become the skill's body, the first step's elements its "
        "precondition. Pruned datasets (linewise prune) give the cleanest skills.")
    build.add_argument("sources", nargs="+", type=Path, metavar="SOURCE",
                       help="run or bench folders, episode folders or pruned datasets")
    build.add_argument("--out", type=Path, required=True, metavar="DIR",
                       help="the folder of skill files to write (made anew)")
    add_log_level_flag(build, "WARNING")
    build.set_defaults(handler=cmd_build)
    show = actions.add_parser("show", help="list a folder's skills")
    show.add_argument("directory", type=Path, metavar="DIR", help="a folder of skills")
    show.add_argument("--goal", help="only the skills whose goal template this goal fits, "
                      "with the arguments it gives")
    add_log_level_flag(show, "WARNING")
    show.set_defaults(handler=cmd_show)


def cmd_build(args: argparse.Namespace) -> int:
    from linewise.apps.skills.build import build_skills, describe_skill

    skills = build_skills(args.sources, args.out)
    for skill in skills:
        print(describe_skill(skill))
    print(f"{len(skills)} skills written to {args.out}/")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from linewise.apps.skills.build import show_skills

    lines = show_skills(args.directory, args.goal)
    print("\n".join(lines) if lines else "no skill fits this goal")
    return 0
