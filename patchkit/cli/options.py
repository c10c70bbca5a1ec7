"""The options several verbs share, defined once (as pdm's ``cli/options.py``), and ``invoke``: the
one way a verb runs — its ``Project`` resolved from ``--config``/``--base``, its ``Options`` made of
every other parameter, ``commands.<verb>.run(project, options)`` ended by ``commands/outcome``."""

# No ``from __future__ import annotations``: typer reads the annotations of the verbs that use these.
import gc

import click
import typer

from patchkit.choices import LANGS, TARGETS

PROJECT_PARAMS = ("config", "base", "pin")  # the project is resolved from these; the rest: the Options

# --config FILE (cli/conventions.py accepts --pin, its older name, hidden); also a pin in any form
CONFIG = typer.Option(
    "--config", help="patchkit.toml whose [target] is the base (or a pin: vllm==X, git+URL@REV, DIR)"
)
BASE = typer.Option("--base", help="base source tree (git or not)")
SERIES = typer.Argument(help="series dir (default: [series].dir, else patches/)")
TARGET = typer.Option(click_type=click.Choice(TARGETS), help="what to patch")
INSPECT = typer.Option("--target", click_type=click.Choice(TARGETS), help="what to inspect")
LANG = typer.Option(click_type=click.Choice(LANGS), help="report language")
STRICT_INDEX = typer.Option(
    "--strict-index", help="refuse a file that is not the preimage blob its index line names"
)
LOCK_TIMEOUT = typer.Option(help="seconds to wait for the target lock")
SITE_PACKAGES = typer.Option(help="site-packages dir holding vllm")
HTML = typer.Option(help="write the HTML report here")
MD = typer.Option(help="write the Markdown report here")
EDIT_PATH = typer.Option("--path", help="the edit work tree (made by patchkit edit)")
JSON_RESULT = typer.Option("--json", help="write the result as JSON here")
SIGNOFF = typer.Option("--signoff", help="add your own Signed-off-by (git config), as git commit -s does")


def invoke(verb: str, params: dict, fn: str = "run", options: str = "Options") -> None:
    """Run ``patchkit.commands.<verb>`` with the parameters of its typer function (``locals()``):
    ``<verb>.run(project, <verb>.Options(...))`` (a group's command names its own ``fn`` and class)."""
    from patchkit.commands.outcome import call

    params = dict(params)
    given = {name: params.pop(name) for name in PROJECT_PARAMS if name in params}

    def run() -> int:
        from patchkit.project import Project

        command = __import__(f"patchkit.commands.{verb}", fromlist=["run"])  # seen by -X importtime
        if not gc.isenabled():  # main() turned it off for the start-up: what loaded is never garbage
            gc.freeze()
            gc.enable()
        return getattr(command, fn)(Project.resolve(**given), getattr(command, options)(**params))

    raise typer.Exit(call(run, json_out=params.get("json_out")))
