"""``patchkit split`` and ``patchkit rebase``: the verbs that write a series."""

# No ``from __future__ import annotations``: typer reads these annotations.
from pathlib import Path
from typing import Annotated, Optional

import typer

from patchkit.cli.options import BASE, CONFIG, SERIES, invoke
from patchkit.cli.root import app


@app.command()
def split(
    replays: Annotated[
        Optional[list[Path]],
        typer.Argument(help="mbox / format-patch / diff files, in order (default: [series] replays)"),
    ] = None,
    base: Annotated[Optional[Path], BASE] = None,
    config: Annotated[Optional[str], CONFIG] = None,
    rules: Annotated[
        Optional[Path],
        typer.Option(help="domains.toml, added to the vLLM rules (default: [series] rules)"),
    ] = None,
    out: Annotated[
        Optional[Path], typer.Option(help="directory for series, patches, split.json (default: [series].dir)")
    ] = None,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace", help="replace the series already there (a copy is kept in .patchkit/replaced/)"
        ),
    ] = False,
    explain: Annotated[bool, typer.Option("--explain", help="print hunk -> domain -> rule")] = False,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="also write split.json here")] = None,
    root: Annotated[
        Optional[str], typer.Option(help="prefix that roots replay paths ('vllm' or '.')")
    ] = None,
    overlay_threshold: Annotated[
        Optional[float], typer.Option(help="0 < F <= 1: new or rewritten (share >= F) files become overlays")
    ] = None,
    author: Annotated[
        Optional[str], typer.Option(help='"Name <email>" for patches from plain diffs (default: git config)')
    ] = None,
) -> None:
    """Split a tangled replay into one patch per domain and prove nothing was lost."""
    invoke("split", locals())


@app.command()
def rebase(
    series_dir: Annotated[Optional[Path], SERIES] = None,
    to: Annotated[
        Optional[str], typer.Option("--to", help="pin of the new base (patchkit.toml, vllm==X, git+URL@REV)")
    ] = None,
    to_base: Annotated[Optional[Path], typer.Option(help="new base source tree")] = None,
    from_: Annotated[
        Optional[str], typer.Option("--from", help="old base pin (default: split.json's)")
    ] = None,
    from_base: Annotated[Optional[Path], typer.Option(help="old base source tree")] = None,
    out: Annotated[Path, typer.Option(help="directory for the rebased series")] = Path("rebase-out"),
    continue_: Annotated[bool, typer.Option("--continue", help="go on after resolving the worktree")] = False,
    abort: Annotated[bool, typer.Option("--abort", help="drop the rebase, restore --out as it was")] = False,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="also write the report here")] = None,
    accept_delete: Annotated[
        bool, typer.Option("--accept-delete", help="--continue: a deleted file is its deletion")
    ] = False,
) -> None:
    """Carry a series to a new base with a 3-way merge; stop on conflicts like git rebase."""
    invoke("rebase", locals())
