"""The start-up path of ``patchkit apply``: a plain command line parsed without click.

typer and click take about three quarters of the start-up of ``patchkit apply --check`` (~110 ms of
a ~190 ms run, against ~20 ms for ``git apply --check`` of the same replay). A command line made only
of the options below, each spelled out and given once, is parsed here and runs ``commands/apply.run``
through ``commands/outcome.call``, the same function and the same ending as through typer. Anything
else — ``-h``, ``--opt=value``, ``-vv``, ``--``, an unknown or repeated option, a value that looks
like an option, a target that is not one of the choices, a number that is not one — returns None,
and ``cli.py`` parses the command line as always, with click's help and click's errors.

The table is not a second definition of ``apply``: ``tests/test_quick_path.py`` reads the options
from click's own view of the command (names, kinds, defaults, choices) and requires this table to
equal it, and parses a matrix of command lines both ways, requiring the same call or a fall-back.
"""

from __future__ import annotations

from pathlib import Path

VERB = "apply"
TARGETS = ("checkout", "site-packages")
# option -> the parameter of commands.apply.run it sets
FLAGS = {"--check": "check", "--reverse": "reverse", "--recover": "recover", "--force": "force",
         "--strict-index": "strict_index"}  # fmt: skip
VALUES = {"--target": ("kind", str), "--path": ("path", Path), "--python": ("python", str),
          "--site-packages": ("site_packages", Path), "--json": ("json_out", Path),
          "--lock-timeout": ("lock_timeout", float)}  # fmt: skip
COUNTS = {"-q": -1, "--quiet": -1, "-v": +1, "--verbose": +1}  # commands/conventions.verbosity_options
DEFAULTS = {"series_dir": None, "kind": "checkout", "path": None, "python": None, "site_packages": None,
            "check": False, "reverse": False, "recover": False, "force": False, "json_out": None,
            "lock_timeout": 30.0, "strict_index": False}  # fmt: skip


def parse(argv: list[str]) -> tuple[dict, int] | None:
    """``apply``'s parameters and the verbosity shift of a plain command line; None to leave it to
    click."""
    if not argv or argv[0] != VERB:
        return None
    values, seen, shift = dict(DEFAULTS), set(), 0
    rest = iter(argv[1:])
    for arg in rest:
        if arg in COUNTS:
            shift += COUNTS[arg]
        elif arg in seen:
            return None  # click takes the last one; leave that to click
        elif arg in FLAGS:
            seen.add(arg)
            values[FLAGS[arg]] = True
        elif arg in VALUES:
            seen.add(arg)
            value = next(rest, None)
            if not value or value.startswith("-"):
                return None
            name, kind = VALUES[arg]
            if kind is float:
                try:
                    values[name] = float(value)
                except ValueError:
                    return None
            else:
                values[name] = kind(value)
        elif not arg or arg.startswith("-") or "series_dir" in seen:
            return None
        else:
            seen.add("series_dir")
            values["series_dir"] = Path(arg)
    if values["kind"] not in TARGETS:
        return None
    return values, shift


def main(argv: list[str]) -> int | None:
    """Run ``apply`` for a plain command line: its exit code; None when click should parse it."""
    parsed = parse(argv)
    if parsed is None:
        return None
    values, shift = parsed
    from patchkit.commands import apply as command
    from patchkit.commands.outcome import call
    from patchkit.console import set_verbosity

    set_verbosity(shift)
    return call(lambda: command.run(**values), json_out=values["json_out"])
