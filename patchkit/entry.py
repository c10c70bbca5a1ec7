"""The ``patchkit`` command: a plain ``apply`` command line starts without click
(``commands/quick.py``); every other one goes through typer (``cli.py``)."""

import sys


def main() -> None:
    try:
        from patchkit.commands import quick

        code = quick.main(sys.argv[1:])
    except KeyboardInterrupt:
        from patchkit.commands.outcome import interrupted

        sys.exit(interrupted())
    if code is None:
        from patchkit.cli import main as typed

        typed()
    sys.exit(code)
