"""The Typer app, its global options, and ``main``: the one command-line parser of ``patchkit``.

Each verb is defined in the module ``VERBS`` names; ``main`` imports only the module of the verb on
the command line (``patchkit --help``, no verb or an unknown one import them all), so ``apply
--check`` starts without building the other eighteen commands."""

# No ``from __future__ import annotations`` here: typer reads the annotations of every command.
import sys
from pathlib import Path
from typing import Annotated, Optional

import click
import typer

from patchkit.choices import COLOR_MODES
from patchkit.cli.conventions import HELP_OPTIONS, Conventions
from patchkit.commands.outcome import interrupted, write_error

app = typer.Typer(
    cls=Conventions,  # -h, -q/-v, --json -, --config, Ctrl-C: every command alike (cli/conventions.py)
    context_settings={"help_option_names": HELP_OPTIONS},
    no_args_is_help=True,
    help="Split, apply and audit downstream patch sets for vLLM.",
    pretty_exceptions_enable=False,  # an unexpected exception is cli/crash.py's
    rich_markup_mode=None,  # plain help: importing rich's markdown stack costs ~150 ms per start
)

# verb -> the module of patchkit.cli that defines it (in the order --help lists them)
VERBS = {
    "split": "series", "rebase": "series", "apply": "target", "status": "target", "checkout": "setup",
    "pin": "setup", "audit": "audit", "report": "audit", "wheel": "setup", "cache": "setup",
    "runtime": "audit", "edit": "edit", "absorb": "edit", "refresh": "edit", "new": "edit", "drop": "edit",
    "move": "edit", "diff": "edit", "ci": "ci",
}  # fmt: skip


def register(verb: str | None) -> None:
    """Define ``verb`` (None or unknown: every verb) on ``app``; a module is imported once."""
    for module in dict.fromkeys([VERBS[verb]] if verb in VERBS else VERBS.values()):
        # __import__, not importlib.import_module: -X importtime (bench/hotpath.py) sees the former
        __import__(f"patchkit.cli.{module}")


def _version(value: bool) -> None:
    if value:
        from patchkit import __version__

        print(f"patchkit {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("-V", "--version", callback=_version, is_eager=True, help="print the version and exit"),
    ] = False,
    quiet: Annotated[int, typer.Option("-q", "--quiet", count=True, show_default=False,
                                       help="print less (every command)")] = 0,
    verbose: Annotated[int, typer.Option("-v", "--verbose", count=True, show_default=False,
                                         help="print more (every command)")] = 0,
    color: Annotated[Optional[str], typer.Option("--color", click_type=click.Choice(COLOR_MODES),
                     help="when to use colour (auto: on a terminal, unless NO_COLOR is set)")] = None,
) -> None:  # fmt: skip
    """Split, apply and audit downstream patch sets for vLLM."""
    from patchkit.ui.console import set_color, set_verbosity

    set_verbosity(verbose - quiet)  # a command's own -q/-v add to this
    set_color(color or "auto")  # a command's own --color wins


def main() -> None:
    """The ``patchkit`` command: parse, run, exit; an unexpected exception is one line, its
    traceback in a file and exit 4 (``cli/crash.py``)."""
    import gc

    # start-up creates ~100k objects that live as long as the process: no collection while they are
    # made (cli/options.invoke freezes them and turns collection back on before the command runs)
    gc.disable()
    from patchkit.cli.crash import guarded

    sys.exit(guarded(lambda: parse_and_run(sys.argv[1:])))


def parse_and_run(argv: list[str]) -> int:
    """Run the command line; a usage error (a bad choice, a missing argument) is written to
    ``--json F`` too."""
    verb = next((arg for arg in argv if not arg.startswith("-")), None)
    register(verb)
    # typer inspects the signature of every registered command at each start: when the command line
    # names one, build only that one (in-process callers that loaded every verb keep them all)
    everything = list(app.registered_commands)
    named = [c for c in everything if _command_name(c) == verb]
    app.registered_commands[:] = named or everything
    try:
        code = app(args=argv, standalone_mode=False, prog_name="patchkit")
    except click.UsageError as exc:
        exc.show()
        if (json_out := _json_option(argv)) is not None:
            write_error(json_out, _UsageLine(exc))
        return exc.exit_code
    except (click.Abort, KeyboardInterrupt):  # Ctrl-C outside a command's own run
        return interrupted()
    finally:
        app.registered_commands[:] = everything
    return code if isinstance(code, int) else 0


def _command_name(command: typer.models.CommandInfo) -> str:
    return command.name or command.callback.__name__.replace("_", "-")


def _json_option(args: list[str]) -> Path | None:
    for index, arg in enumerate(args):
        if arg == "--json" and index + 1 < len(args):
            return Path(args[index + 1])
        if arg.startswith("--json="):
            return Path(arg.split("=", 1)[1])
    return None


class _UsageLine:
    """A click usage error shaped like a UserError for ``write_error``."""

    def __init__(self, exc: click.UsageError) -> None:
        self.exit_code, self.text = exc.exit_code, exc.format_message()

    def line(self) -> str:
        return self.text
