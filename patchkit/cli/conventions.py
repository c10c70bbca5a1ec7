"""What every command does alike, applied in one place to whatever ``cli/`` registers, so a new
verb gets it by being registered: ``-h``/``--help``, ``-q``/``-v``, ``--json -`` (the JSON on
stdout, the human lines moved to stderr), ``--config FILE`` for the project's patchkit.toml (the
older ``--pin`` kept as a hidden alias), Ctrl-C as one line and exit 130."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import click
from typer.core import TyperGroup

from patchkit.choices import COLOR_MODES, GATE_NAMES
from patchkit.commands.outcome import REAL_STDOUT, SCRATCH_PREFIX, STDOUT
from patchkit.ui.console import set_color, set_verbosity, verbosity


def gate_list(text: str | None) -> str | None:
    """--gates: a comma list of gate names, refused like a click choice when a name is unknown."""
    return _gate_names(text, at_least_one=True)


def optional_gate_list(text: str | None) -> str | None:
    """--optional-gates: as ``gate_list``, but ``""`` is a list: none, over ``[audit] optional``."""
    return _gate_names(text, at_least_one=False)


def _gate_names(text: str | None, at_least_one: bool) -> str | None:
    if text is None:
        return None
    names = [g.strip() for g in text.split(",") if g.strip()]
    unknown = [g for g in names if g not in GATE_NAMES]
    if unknown or (at_least_one and not names):
        bad = unknown[0] if unknown else text
        raise click.BadParameter(f"{bad!r} is not one of {', '.join(map(repr, GATE_NAMES))}.")
    return ",".join(names)


HELP_OPTIONS = ["-h", "--help"]
CONFIG_OPTION = "--config"  # patchkit.toml, or a pin file of its form ([target])
CONFIG_ALIASES = ("--pin",)  # the same file under its older name: accepted, not shown
JSON_OPTION = "--json"
STDOUT_HELP = " ('-': stdout)"


class Conventions(TyperGroup):
    """The app's click group: each command it holds is adopted once, when the group is built."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for command in self.commands.values():
            adopt(command)

    def resolve_command(self, ctx: click.Context, args: list[str]):
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as exc:  # typer adds "Did you mean ...?", and click 8.4+ adds its own
            if getattr(exc, "possibilities", None):
                exc.message = exc.message.partition(" Did you mean ")[0]
            raise


def adopt(command: click.Command) -> None:
    for sub in command.commands.values() if isinstance(command, click.Group) else ():
        adopt(sub)  # a verb with subcommands of its own: each of them too
    for param in command.params:
        if not isinstance(param, click.Option):
            continue
        if JSON_OPTION in param.opts:
            _json_may_go_to_stdout(param)
        if {CONFIG_OPTION, *CONFIG_ALIASES} & set(param.opts):
            _one_config_name(param)
    if not any("--quiet" in getattr(p, "opts", ()) for p in command.params):  # -q, -v, --color
        command.params += verbosity_options()


def verbosity_options() -> list[click.Option]:
    """``-q`` (repeatable: less) and ``-v`` (more); given on the group and on a command, they add up."""
    return [
        click.Option(["-q", "--quiet"], count=True, expose_value=False, callback=_shift(-1),
                     help="print less: errors and the result only"),
        click.Option(["-v", "--verbose"], count=True, expose_value=False, callback=_shift(+1),
                     help="print more: per-file detail, where the time went"),
        click.Option(["--color"], type=click.Choice(COLOR_MODES), expose_value=False, callback=_color,
                     help="when to use colour (auto: on a terminal, unless NO_COLOR is set)"),
    ]  # fmt: skip


def _color(ctx: click.Context, param: click.Parameter, mode: str | None) -> None:
    if mode:
        set_color(mode)


def _shift(sign: int):
    def callback(ctx: click.Context, param: click.Parameter, count: int) -> None:
        if count:
            set_verbosity(verbosity() + sign * count)

    return callback


def _one_config_name(param: click.Option) -> None:
    """``--config`` shown, ``--pin`` accepted: whichever of the two a verb declared."""
    param.opts = [CONFIG_OPTION, *(alias for alias in CONFIG_ALIASES)]
    param.__class__ = _with_hidden_aliases(type(param))


_ALIASED: dict[type, type] = {}


def _with_hidden_aliases(cls: type) -> type:
    if cls not in _ALIASED:

        def get_help_record(self, ctx):
            shown, self.opts = self.opts, [o for o in self.opts if o not in CONFIG_ALIASES]
            try:
                return cls.get_help_record(self, ctx)
            finally:
                self.opts = shown

        _ALIASED[cls] = type(f"Aliased{cls.__name__}", (cls,), {"get_help_record": get_help_record})
    return _ALIASED[cls]


def _json_may_go_to_stdout(param: click.Option) -> None:
    """``--json -``: the command writes a scratch file, which goes to stdout when the command ends
    (its record of a failure too); meanwhile every human line goes to stderr, so stdout is JSON only."""
    given = param.callback

    def callback(ctx: click.Context, p: click.Parameter, value):
        value = given(ctx, p, value) if given else value
        if value is None or str(value) != STDOUT:
            return value
        import tempfile  # only for --json -: tempfile costs start-up (it loads random)

        scratch = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX))
        REAL_STDOUT.append(sys.stdout)
        ctx.call_on_close(lambda out=sys.stdout: _emit(scratch, out))
        ctx.with_resource(contextlib.redirect_stdout(sys.stderr))
        return scratch / "out.json"

    param.callback = callback
    if param.help and STDOUT_HELP not in param.help:
        param.help += STDOUT_HELP


def _emit(scratch: Path, out) -> None:
    import shutil

    try:
        record = scratch / "out.json"
        if record.is_file():
            out.write(record.read_text("utf-8"))
            out.flush()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
