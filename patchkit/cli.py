"""The command line: each command parses its options and calls one function."""

# No ``from __future__ import annotations`` here: typer would evaluate every string annotation of
# every command at each start (about 13 ms of CPU); these annotations are built once, at import.
import sys
from pathlib import Path
from typing import Annotated, Optional

import click
import typer

from patchkit.choices import COLOR_MODES, GATE_NAMES, LANGS, SELECTIONS, TARGETS
from patchkit.commands.conventions import (
    HELP_OPTIONS,
    Conventions,
    gate_list,
    interrupted,
    optional_gate_list,
    write_error,
)
from patchkit.commands.editverbs import register as register_edit_verbs

app = typer.Typer(
    cls=Conventions,  # -h, -q/-v, --json -, --config, Ctrl-C: every command alike (commands/conventions.py)
    context_settings={"help_option_names": HELP_OPTIONS},
    no_args_is_help=True,
    help="Split, apply and audit downstream patch sets for vLLM.",
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: importing rich's markdown stack costs ~150 ms per start
)
app.add_typer(__import__("patchkit.commands.ci").commands.ci.ci_app, name="ci")  # buildkite | durations


def _version(value: bool) -> None:
    if value:
        from patchkit import __version__

        print(f"patchkit {__version__}")
        raise typer.Exit(0)


_QUIET = typer.Option("-q", "--quiet", count=True, show_default=False, help="print less (every command)")
_VERBOSE = typer.Option("-v", "--verbose", count=True, show_default=False, help="print more (every command)")
_COLOR = typer.Option(
    "--color",
    click_type=click.Choice(COLOR_MODES),
    help="when to use colour (auto: on a terminal, unless NO_COLOR is set)",
)
# the project's patchkit.toml (or a pin file of its form); conventions.py keeps --pin as its alias
_CONFIG = typer.Option("--config", help="patchkit.toml whose [target] is the base")


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("-V", "--version", callback=_version, is_eager=True, help="print the version and exit"),
    ] = False,
    quiet: Annotated[int, _QUIET] = 0,
    verbose: Annotated[int, _VERBOSE] = 0,
    color: Annotated[Optional[str], _COLOR] = None,
) -> None:
    """Split, apply and audit downstream patch sets for vLLM."""
    from patchkit.ui.console import set_color, set_verbosity

    set_verbosity(verbose - quiet)  # a command's own -q/-v add to this
    set_color(color or "auto")  # a command's own --color wins


def _run(fn, *args, json_out: Path | None = None) -> None:
    """Turn user errors into one line and exit 2 (or 1 for failed checks); bugs still raise.
    With ``--json F`` a failed command writes its error there too (``commands/outcome.call``)."""
    from patchkit.commands.outcome import call

    raise typer.Exit(call(fn, *args, json_out=json_out))


@app.command()
def split(
    replays: Annotated[
        Optional[list[Path]],
        typer.Argument(help="mbox / format-patch / diff files, in order (default: [series] replays)"),
    ] = None,
    base: Annotated[Optional[Path], typer.Option(help="base source tree (git or not)")] = None,
    pin: Annotated[Optional[Path], _CONFIG] = None,
    rules: Annotated[
        Optional[Path],
        typer.Option(help="domains.toml, added to the vLLM rules (default: [series] rules)"),
    ] = None,
    out: Annotated[Path, typer.Option(help="directory for series, patches, split.json")] = Path("split-out"),
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
    from patchkit.commands import split as command

    _run(command.run, replays, base, pin, rules, out, explain, json_out, root, overlay_threshold, author,
         json_out=json_out)  # fmt: skip


@app.command()
def rebase(
    series_dir: Annotated[Optional[Path], typer.Argument(help="series dir (default: [series].dir)")] = None,
    to: Annotated[Optional[Path], typer.Option("--to", help="pin file of the new base")] = None,
    to_base: Annotated[Optional[Path], typer.Option(help="new base source tree")] = None,
    from_: Annotated[Optional[Path], typer.Option("--from", help="old base pin (split.json)")] = None,
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
    from patchkit.commands import rebase as command

    _run(command.run, series_dir, to, to_base, from_, from_base, out, continue_, abort, json_out,
         accept_delete, json_out=json_out)  # fmt: skip


_TARGET = typer.Option(click_type=click.Choice(TARGETS), help="what to patch")
_INSPECT = typer.Option("--target", click_type=click.Choice(TARGETS), help="what to inspect")
_LANG = typer.Option(click_type=click.Choice(LANGS), help="report language")
_STRICT_INDEX = typer.Option(
    "--strict-index", help="refuse a file that is not the preimage blob its index line names"
)


@app.command("apply")
def apply_(
    series_dir: Annotated[Optional[Path], typer.Argument(help="series dir (default: [series].dir)")] = None,
    target: Annotated[str, _TARGET] = "checkout",
    path: Annotated[Optional[Path], typer.Option(help="checkout to patch (--target checkout)")] = None,
    python: Annotated[Optional[str], typer.Option(help="interpreter whose vllm to patch")] = None,
    site_packages: Annotated[Optional[Path], typer.Option(help="site-packages dir holding vllm")] = None,
    check: Annotated[bool, typer.Option("--check", help="say what would happen, write nothing")] = False,
    reverse: Annotated[bool, typer.Option("--reverse", help="restore the base bytes")] = False,
    recover: Annotated[
        bool, typer.Option("--recover", help="roll back an interrupted apply, then stop")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="apply over a version mismatch / reverse over drift")
    ] = False,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="write the result as JSON")] = None,
    lock_timeout: Annotated[float, typer.Option(help="seconds to wait for the target lock")] = 30,
    strict_index: Annotated[bool, _STRICT_INDEX] = False,
) -> None:
    """Apply a series (and overlays) to a checkout or an installed vllm, all or nothing."""
    from patchkit.commands import apply as command

    _run(command.run, series_dir, target, path, python, site_packages, check, reverse, recover, force,
         json_out, lock_timeout, strict_index, json_out=json_out)  # fmt: skip


@app.command()
def status(
    series_dir: Annotated[Optional[Path], typer.Argument(help="also compare with this series")] = None,
    target: Annotated[str, _INSPECT] = "checkout",
    path: Annotated[Optional[Path], typer.Option(help="checkout (--target checkout)")] = None,
    python: Annotated[Optional[str], typer.Option(help="interpreter whose vllm to inspect")] = None,
    site_packages: Annotated[Optional[Path], typer.Option(help="site-packages dir holding vllm")] = None,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="write the result as JSON")] = None,
    lock_timeout: Annotated[float, typer.Option(help="seconds to wait for the target lock")] = 30,
) -> None:
    """What is applied where, verified by hash; exit 1 on drift."""
    from patchkit.commands import status as command

    _run(
        command.run,
        series_dir,
        target,
        path,
        python,
        site_packages,
        json_out,
        lock_timeout,
        json_out=json_out,
    )


@app.command()
def checkout(
    pin: Annotated[Optional[Path], _CONFIG] = None,
    dest: Annotated[Optional[Path], typer.Option(help="copy the prepared base here")] = None,
) -> None:
    """Prepare the pinned base tree and print its path."""
    from patchkit.commands import checkout as command

    _run(command.run, pin, dest)


@app.command()
def pin(
    spec: Annotated[
        Optional[str], typer.Argument(help="NAME==VERSION on the package index, e.g. vllm==0.33.0")
    ] = None,
    git: Annotated[
        Optional[tuple[str, str]], typer.Option(help="URL REV: a git repository and commit (or tag)")
    ] = None,
    path: Annotated[Optional[Path], typer.Option(help="a source tree to pin")] = None,
    config: Annotated[
        Optional[Path], typer.Option(help="the toml to edit (default: the project's patchkit.toml)")
    ] = None,
) -> None:
    """Write or update [target] in patchkit.toml, with the sha256 the package index lists."""
    from patchkit.commands import pin as command

    _run(command.run, spec, list(git) if git else None, path, config)


@app.command()
def audit(
    series_dir: Annotated[Optional[Path], typer.Argument(help="series dir (default: [series].dir)")] = None,
    pin: Annotated[Optional[Path], _CONFIG] = None,
    base: Annotated[Optional[Path], typer.Option(help="base source tree (git or not)")] = None,
    gates: Annotated[
        Optional[str], typer.Option(callback=gate_list, help=f"comma list of {','.join(GATE_NAMES)}")
    ] = None,
    optional_gates: Annotated[
        Optional[str],
        typer.Option(
            callback=optional_gate_list,
            help="comma list of gates whose could-not-run is accepted ('': none; default: [audit] optional)",
        ),
    ] = None,
    jobs: Annotated[Optional[int], typer.Option(min=1, help="patches audited in parallel")] = None,
    python: Annotated[
        Optional[str],
        typer.Option(help="interpreter the tests gate runs pytest with and the imports gate imports with"),
    ] = None,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="write the audit JSON here")] = None,
    html: Annotated[Optional[Path], typer.Option(help="write the HTML report here")] = None,
    md: Annotated[Optional[Path], typer.Option(help="write the Markdown report here")] = None,
    junit: Annotated[Optional[Path], typer.Option(help="write a JUnit XML of the gates here")] = None,
    shard: Annotated[
        Optional[str],
        typer.Option(
            help="I/N: this runner's share; with the tests gate, its tests of the whole audit "
            "(balanced by test-durations.json) and the other gates of every N-th patch, else every "
            "N-th patch; patchkit report merges the shards"
        ),  # fmt: skip
    ] = None,
    lang: Annotated[str, _LANG] = "en",
    no_cache: Annotated[bool, typer.Option("--no-cache", help="ignore and do not fill the cache")] = False,
    since: Annotated[Optional[Path], typer.Option(help="the last audit's JSON: what changed")] = None,
    prepare_env: Annotated[
        bool, typer.Option("--prepare-env", help="build the cached test venv for the base if needed")
    ] = False,
    select: Annotated[
        Optional[str],
        typer.Option(
            click_type=click.Choice(SELECTIONS),
            help="tests: upstream (CI's selection, default) | affected (only tests the base's "
            "coverage map ties to the change; [audit] select)",
        ),  # fmt: skip
    ] = None,
) -> None:
    """Run the gates ([audit] gates, else apply, ruff, dco, tests; also lint, imports) over a series
    and write the reports (default: reports/ audit.json, .html, .md; any output flag replaces them).
    Exit 0 every patch ready, 1 a gate failed, 3 incomplete (a requested gate could not run)."""
    from patchkit.commands import audit as command

    outputs = command.Outputs(json_out, html, md, junit)
    _run(command.run, series_dir, pin, base, gates, optional_gates, jobs, python, outputs, shard, lang,
         no_cache, prepare_env, since, select, json_out=json_out)  # fmt: skip


@app.command()
def report(
    results: Annotated[list[Path], typer.Argument(help="audit result JSON files (shards are merged)")],
    html: Annotated[Optional[Path], typer.Option(help="write the HTML report here")] = None,
    md: Annotated[Optional[Path], typer.Option(help="write the Markdown PR comment here")] = None,
    junit: Annotated[Optional[Path], typer.Option(help="write JUnit XML here")] = None,
    lang: Annotated[
        Optional[str],
        typer.Option(click_type=click.Choice(LANGS), help="report language (default: from the locale)"),
    ] = None,
) -> None:
    """Re-render (and merge) audit results as HTML, Markdown and JUnit."""
    from patchkit.commands import report as command

    _run(command.run, results, html, md, junit, lang)


@app.command()
def wheel(
    series_dir: Annotated[
        Optional[Path], typer.Argument(help="series dir (default: [series].dir; --verify: to check with)")
    ] = None,
    pin: Annotated[Optional[Path], typer.Option(help="patchkit.toml or pin file with [target]")] = None,
    out: Annotated[Optional[Path], typer.Option(help="directory for the new wheel")] = None,
    name: Annotated[Optional[str], typer.Option(help="distribution name of the new wheel (renamed)")] = None,
    version: Annotated[
        Optional[str], typer.Option("--version", help="its version (default: the pinned one + pk.<hash>)")
    ] = None,
    audit: Annotated[
        Optional[Path],
        typer.Option(help="audit JSON: verdicts into the provenance (with --verify: checked against it)"),
    ] = None,
    verify: Annotated[Optional[Path], typer.Option(help="check this wheel instead of building one")] = None,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="write the result as JSON")] = None,
    strict_index: Annotated[bool, _STRICT_INDEX] = False,
) -> None:
    """Build the pinned vLLM wheel with the series applied (new version, RECORD, provenance), or --verify
    one. Exit 1 when a patch does not apply or a check fails."""
    from patchkit.commands import wheel as command

    _run(command.run, series_dir, pin, out, name, version, audit, verify, json_out, strict_index,
         json_out=json_out)  # fmt: skip


@app.command("cache")
def cache_(
    prune: Annotated[
        bool,
        typer.Option("--prune", help="remove what is of no use to this patchkit (other versions' results)"),
    ] = False,
    older_than: Annotated[
        Optional[str], typer.Option(help="prune entries last written longer ago than this (30d, 12h, 2w)")
    ] = None,
    everything: Annotated[bool, typer.Option("--all", help="prune every entry")] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="say what pruning would remove, remove nothing")
    ] = False,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="write the listing as JSON")] = None,
) -> None:
    """Show what the cache holds (entries, sizes, which patchkit they belong to) and prune it."""
    from patchkit.commands import cache as command

    _run(command.run, prune, older_than, everything, dry_run, json_out, json_out=json_out)


@app.command()
def runtime(
    plugin_dir: Annotated[Path, typer.Argument(help="the plugin's patch package (e.g. vllm_ascend/patch)")],
    pin: Annotated[Optional[Path], _CONFIG] = None,
    since: Annotated[Optional[str], typer.Option(help="an older pin: a file, or vllm==X.Y.Z")] = None,
    python: Annotated[Optional[str], typer.Option(help="a python with the pinned vLLM (real import)")] = None,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="write the runtime JSON here")] = None,
    html: Annotated[Optional[Path], typer.Option(help="write the HTML report here")] = None,
    md: Annotated[Optional[Path], typer.Option(help="write the Markdown report here")] = None,
    junit: Annotated[Optional[Path], typer.Option(help="write a JUnit XML of the checks here")] = None,
    lang: Annotated[str, _LANG] = "en",
    timeout: Annotated[float, typer.Option(help="seconds the real import may take")] = 600,
) -> None:
    """A plugin's monkeypatches checked against the pinned vLLM: each target there, its signature, its
    change since --since (with the upstream diff). Default reports: reports/runtime.json, .html, .md.
    Exit 0 all ready, 1 a check failed, 3 incomplete."""
    from patchkit.commands import audit as audit_command
    from patchkit.commands import runtime as command

    outputs = audit_command.Outputs(json_out, html, md, junit)
    _run(command.run, plugin_dir, pin, since, python, outputs, lang, timeout, json_out=json_out)


register_edit_verbs(app, _run)  # edit, absorb, refresh, new, drop, move, diff (commands/editverbs.py)


def main() -> None:
    """Run the CLI; a usage error (a bad choice, a missing argument) is written to ``--json F`` too."""
    # typer inspects the signature of every registered command at each start: when the command
    # line names one, register only that one (``patchkit --help`` still lists them all)
    verb = next((arg for arg in sys.argv[1:] if not arg.startswith("-")), None)
    named = [c for c in app.registered_commands if _command_name(c) == verb]
    everything = list(app.registered_commands)
    app.registered_commands[:] = named or everything
    try:
        code = app(standalone_mode=False, prog_name="patchkit")
    except click.UsageError as exc:
        exc.show()
        if (json_out := _json_option(sys.argv[1:])) is not None:
            write_error(json_out, _UsageLine(exc))
        sys.exit(exc.exit_code)
    except (click.Abort, KeyboardInterrupt):  # Ctrl-C outside a command's own run
        sys.exit(interrupted())
    finally:  # in-process callers (tests) keep the whole app
        app.registered_commands[:] = everything
    sys.exit(code if isinstance(code, int) else 0)


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
    """A click usage error shaped like a UserError for ``_write_error``."""

    def __init__(self, exc: click.UsageError) -> None:
        self.exit_code, self.text = exc.exit_code, exc.format_message()

    def line(self) -> str:
        return self.text


if __name__ == "__main__":
    main()
