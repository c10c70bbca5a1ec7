"""Typer wiring of the edit loop's verbs (edit, absorb, refresh, new, drop, move, diff); ``cli.py``
registers them with one call, so its own module stays small."""

# no ``from __future__ import annotations``: typer reads these annotations (see cli.py)
from pathlib import Path
from typing import Annotated, Optional

import typer

_PATH = typer.Option("--path", help="the edit work tree (made by patchkit edit)")
_JSON = typer.Option("--json", help="write the result as JSON here")
_SIGNOFF = typer.Option("--signoff", help="add your own Signed-off-by (git config), as git commit -s does")


def register(app: typer.Typer, run) -> None:  # noqa: ANN001 - cli's _run
    @app.command()
    def edit(
        series: Annotated[
            Optional[Path], typer.Argument(help="the series dir (not needed when DIR exists)")
        ] = None,
        path: Annotated[Path, _PATH] = Path("patchkit-edit"),
        base: Annotated[Optional[Path], typer.Option(help="base source tree")] = None,
        config: Annotated[
            Optional[Path], typer.Option("--config", help="patchkit.toml whose [target] is the base")
        ] = None,
        json_out: Annotated[Optional[Path], _JSON] = None,
    ) -> None:
        """Make a git work tree of the series (a base commit + one commit per patch)."""
        from patchkit.commands import edit as command

        run(command.run, series, path, base, config, json_out, json_out=json_out)

    @app.command()
    def absorb(
        path: Annotated[Path, _PATH] = Path("patchkit-edit"),
        dry_run: Annotated[
            bool, typer.Option("--dry-run", help="print where each hunk goes; change nothing")
        ] = False,
        into: Annotated[
            Optional[str], typer.Option("--into", help="the patch for hunks that commute with every patch")
        ] = None,
        signoff: Annotated[bool, _SIGNOFF] = False,
        json_out: Annotated[Optional[Path], _JSON] = None,
    ) -> None:
        """Fold each uncommitted hunk into the latest patch it does not commute with."""
        from patchkit.commands import absorb as command

        run(command.run, path, dry_run, into, signoff, json_out, json_out=json_out)

    @app.command()
    def refresh(
        patch: Annotated[str, typer.Argument(help="patch file name, domain or number")],
        path: Annotated[Path, _PATH] = Path("patchkit-edit"),
        signoff: Annotated[bool, _SIGNOFF] = False,
        json_out: Annotated[Optional[Path], _JSON] = None,
    ) -> None:
        """Put the uncommitted changes into PATCH (refused when a later patch touches the same lines)."""
        from patchkit.commands import refresh as command

        run(command.run, patch, path, signoff, json_out, json_out=json_out)

    @app.command()
    def new(
        name: Annotated[str, typer.Argument(help="the new patch's name (its file: NNNN-NAME.patch)")],
        after: Annotated[
            Optional[str], typer.Option("--after", help="place it after this patch (default: last)")
        ] = None,
        path: Annotated[Path, _PATH] = Path("patchkit-edit"),
        signoff: Annotated[bool, _SIGNOFF] = False,
        json_out: Annotated[Optional[Path], _JSON] = None,
    ) -> None:
        """Make the uncommitted changes a new patch."""
        from patchkit.commands import new as command

        run(command.run, name, after, path, signoff, json_out, json_out=json_out)

    @app.command()
    def drop(
        patch: Annotated[str, typer.Argument(help="patch file name, domain or number")],
        path: Annotated[Path, _PATH] = Path("patchkit-edit"),
        json_out: Annotated[Optional[Path], _JSON] = None,
    ) -> None:
        """Remove a patch (refused while a later patch needs it)."""
        from patchkit.commands import drop as command

        run(command.run, patch, path, json_out, json_out=json_out)

    @app.command()
    def move(
        patch: Annotated[str, typer.Argument(help="patch file name, domain or number")],
        after: Annotated[str, typer.Option("--after", help="the patch to follow ('base': first)")],
        path: Annotated[Path, _PATH] = Path("patchkit-edit"),
        json_out: Annotated[Optional[Path], _JSON] = None,
    ) -> None:
        """Reorder a patch (refused when a prefix of the series would break)."""
        from patchkit.commands import move as command

        run(command.run, patch, after, path, json_out, json_out=json_out)

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
        json_out: Annotated[Optional[Path], _JSON] = None,
    ) -> None:
        """What changed between two revisions of a series, patch by patch."""
        from patchkit.commands import diff as command

        run(command.run, old, new, repo, interdiff, json_out, json_out=json_out)
