"""The edit loop's verbs (edit, absorb, refresh, new, drop, move) and ``diff``."""

# No ``from __future__ import annotations``: typer reads these annotations.
from pathlib import Path
from typing import Annotated, Optional

import typer

from patchkit.cli.options import BASE, CONFIG, EDIT_PATH, JSON_RESULT, SIGNOFF, invoke
from patchkit.cli.root import app
from patchkit.project import EDIT_DIR


@app.command()
def edit(
    series: Annotated[
        Optional[Path],
        typer.Argument(help="the series dir (default: [series].dir; not needed when DIR exists)"),
    ] = None,
    path: Annotated[Path, EDIT_PATH] = EDIT_DIR,
    base: Annotated[Optional[Path], BASE] = None,
    config: Annotated[Optional[str], CONFIG] = None,
    json_out: Annotated[Optional[Path], JSON_RESULT] = None,
) -> None:
    """Make a git work tree of the series (a base commit + one commit per patch)."""
    invoke("edit", locals())


@app.command()
def absorb(
    path: Annotated[Path, EDIT_PATH] = EDIT_DIR,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="print where each hunk goes; change nothing")
    ] = False,
    into: Annotated[
        Optional[str], typer.Option("--into", help="the patch for hunks that commute with every patch")
    ] = None,
    signoff: Annotated[bool, SIGNOFF] = False,
    json_out: Annotated[Optional[Path], JSON_RESULT] = None,
) -> None:
    """Fold each uncommitted hunk into the latest patch it does not commute with."""
    invoke("absorb", locals())


@app.command()
def refresh(
    patch: Annotated[str, typer.Argument(help="patch file name, domain or number")],
    path: Annotated[Path, EDIT_PATH] = EDIT_DIR,
    signoff: Annotated[bool, SIGNOFF] = False,
    json_out: Annotated[Optional[Path], JSON_RESULT] = None,
) -> None:
    """Put the uncommitted changes into PATCH (refused when a later patch touches the same lines)."""
    invoke("refresh", locals())


@app.command()
def new(
    name: Annotated[str, typer.Argument(help="the new patch's name (its file: NNNN-NAME.patch)")],
    after: Annotated[
        Optional[str], typer.Option("--after", help="place it after this patch (default: last)")
    ] = None,
    path: Annotated[Path, EDIT_PATH] = EDIT_DIR,
    signoff: Annotated[bool, SIGNOFF] = False,
    json_out: Annotated[Optional[Path], JSON_RESULT] = None,
) -> None:
    """Make the uncommitted changes a new patch."""
    invoke("new", locals())


@app.command()
def drop(
    patch: Annotated[str, typer.Argument(help="patch file name, domain or number")],
    path: Annotated[Path, EDIT_PATH] = EDIT_DIR,
    json_out: Annotated[Optional[Path], JSON_RESULT] = None,
) -> None:
    """Remove a patch (refused while a later patch needs it)."""
    invoke("drop", locals())


@app.command()
def move(
    patch: Annotated[str, typer.Argument(help="patch file name, domain or number")],
    after: Annotated[str, typer.Option("--after", help="the patch to follow ('base': first)")],
    path: Annotated[Path, EDIT_PATH] = EDIT_DIR,
    json_out: Annotated[Optional[Path], JSON_RESULT] = None,
) -> None:
    """Reorder a patch (refused when a prefix of the series would break)."""
    invoke("move", locals())


@app.command("diff")
def diff_(
    old: Annotated[str, typer.Argument(help="old series dir, or REV:DIR of a git repository")],
    new: Annotated[str, typer.Argument(help="new series dir, or REV:DIR")],
    repo: Annotated[
        Optional[Path], typer.Option("--repo", help="the git repository of REV:DIR (default: here)")
    ] = None,
    interdiff: Annotated[
        bool, typer.Option("--interdiff", help="print each changed patch's interdiff")
    ] = False,
    json_out: Annotated[Optional[Path], JSON_RESULT] = None,
) -> None:
    """What changed between two revisions of a series, patch by patch."""
    invoke("diff", locals())
