"""The ``patchkit`` command (the console script): every command line goes through ``cli`` — one
parser (Typer/click), one crash handler."""


def main() -> None:
    from patchkit.cli import main as run

    run()
