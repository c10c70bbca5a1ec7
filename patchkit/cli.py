"""The command line: each command parses its options and calls one function."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Split, apply and audit downstream patch sets for vLLM.",
    pretty_exceptions_enable=False,
)


@app.callback()
def _main() -> None:
    """Split, apply and audit downstream patch sets for vLLM."""


def _run(fn, *args) -> None:
    """Turn user errors into one line and exit 2 (or 1 for failed checks); bugs still raise."""
    from patchkit.errors import UserError

    try:
        code = fn(*args)
    except UserError as exc:
        print(f"patchkit: error: {exc.line()}", file=sys.stderr)
        raise typer.Exit(exc.exit_code) from None
    raise typer.Exit(code)


@app.command()
def split(
    replays: Annotated[list[Path], typer.Argument(help="mbox / format-patch / diff files, in order")],
    base: Annotated[Optional[Path], typer.Option(help="base source tree (git or not)")] = None,
    pin: Annotated[Optional[Path], typer.Option(help="patchkit.toml whose [target] is the base")] = None,
    rules: Annotated[Optional[Path], typer.Option(help="domains.toml (default: vLLM rules)")] = None,
    out: Annotated[Path, typer.Option(help="directory for series, patches, split.json")] = Path("split-out"),
    explain: Annotated[bool, typer.Option(help="print hunk -> domain -> rule")] = False,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="also write split.json here")] = None,
    root: Annotated[
        Optional[str], typer.Option(help="prefix that roots replay paths ('vllm' or '.')")
    ] = None,
) -> None:
    """Split a tangled replay into one patch per domain and prove nothing was lost."""
    from patchkit.commands import split as command

    _run(command.run, replays, base, pin, rules, out, explain, json_out, root)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
