"""README's command table and ``--help`` agree: the same verbs, and each verb's options as listed
there exist (and are shown) in its help, and every option its help shows is in the table (the
habits every command shares, -h / -q / -v, are said once below the table)."""

from __future__ import annotations

import re
from pathlib import Path

import typer.main
from typer.testing import CliRunner

from patchkit.cli import app

README = Path(__file__).resolve().parents[1] / "README.md"
SHARED = {"-h", "--help", "-q", "--quiet", "-v", "--verbose", "--color"}
OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


GROUPS = {
    name for name, command in typer.main.get_command(app).commands.items() if hasattr(command, "commands")
}


def every_verb() -> set[str]:
    """The app's verbs, a sub-app's commands as `group command`."""
    verbs = set()
    for name, command in typer.main.get_command(app).commands.items():
        verbs |= {f"{name} {sub}" for sub in command.commands} if name in GROUPS else {name}
    return verbs


def readme_table() -> dict[str, set[str]]:
    text = README.read_text("utf-8")
    block = text[text.index("## Commands") :]
    block = block[block.index("```\n") + 4 : block.index("\n```", block.index("```\n") + 4)]
    verbs: dict[str, set[str]] = {}
    verb = None
    for line in block.splitlines():
        if line.startswith("patchkit "):
            words = line.split()
            verb = words[1]
            if verb in GROUPS:  # a sub-app (`patchkit ci buildkite`): its commands are verbs of their own
                verb = f"{verb} {words[2]}"
            verbs.setdefault(verb, set())
        code = line.split("  # ", 1)[0]
        if verb is not None:
            verbs[verb] |= set(OPTION.findall(code))
    return verbs


def help_options(verb: str) -> set[str]:
    """The options ``patchkit VERB --help`` shows: the first column of its Options section."""
    shown = CliRunner().invoke(app, [*verb.split(), "--help"]).output
    section = shown[shown.index("Options:") :].splitlines()[1:]
    columns = [line.strip().split("  ", 1)[0] for line in section if line.startswith("  -")]
    return {o for column in columns for o in OPTION.findall(column)}


def test_the_readme_lists_every_verb_and_no_other():
    assert set(readme_table()) == every_verb()


def test_each_verbs_options_agree_with_its_help():
    for verb, listed in readme_table().items():
        shown = help_options(verb)
        assert listed - shown == set(), f"README lists options {verb} --help does not show"
        assert shown - listed - SHARED == set(), f"{verb} --help shows options the README does not list"


def test_the_shared_habits_are_said_under_the_table():
    text = README.read_text("utf-8")
    after = " ".join(text[text.index("## Commands") :][:4000].split())
    for habit in ("`-h`/`--help`", "`-q`/`--quiet`", "`-v`/`--verbose`", "`--color auto|always|never`",
                  "`NO_COLOR`", "`--json -`", "`--config FILE`",
                  "patchkit -V", "exit 130"):  # fmt: skip
        assert habit in after, habit
