"""``patchkit ci``: CI pipelines for the audit (``buildkite``) and the durations file ``--shard``
balances by (``durations``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from patchkit.errors import UserError


def buildkite(series_dir: Path | None, pin_file: Path | None, base: Path | None, shards: int,
              out: Path | None, queue: str | None, gpu_queue: str, install: str) -> int:  # fmt: skip
    from patchkit.atomic import write_atomic
    from patchkit.base.pin import prepare_base
    from patchkit.base.tree import BaseTree
    from patchkit.config import load_config, project_config
    from patchkit.output import info
    from patchkit.pipelines.buildkite import INSTALL, accelerator_tests, pipeline
    from patchkit.split.rules import load_rules

    if not 1 <= shards <= 256:
        raise UserError(f"--shards {shards}: expected 1..256")
    config = load_config(pin_file) if pin_file else project_config()
    series_dir = series_dir or config.series.dir
    if not (series_dir / "series").is_file():
        raise UserError("not a series directory (no 'series' file)", str(series_dir))
    tree = BaseTree(base if base is not None else prepare_base(config.target))  # the GPU steps' tests
    gpu = accelerator_tests(series_dir, tree, load_rules(config.series.rules))
    text = (
        json.dumps(pipeline(str(series_dir), shards, gpu, install or INSTALL, queue, gpu_queue), indent=2)
        + "\n"
    )
    if out is None or str(out) == "-":
        print(text, end="")
    else:
        write_atomic(out, text.encode())
        info(f"wrote {out}: {shards} shard step(s), {len(gpu)} GPU step(s), a report step")
    return 0


def durations(record: Path, out: Path | None) -> int:
    from patchkit.atomic import write_atomic
    from patchkit.output import info
    from patchkit.testrun.testplan import DURATIONS_FILE, TESTS_KEY, durations_from, tests_from

    try:
        data = json.loads(record.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read audit record: {exc}", str(record)) from exc
    found = durations_from(data) if isinstance(data, dict) else {}
    if not found:
        raise UserError("the record has no tests gate durations (path_seconds)", str(record))
    listed = tests_from(data) if isinstance(data, dict) else {}
    target = out or Path(data.get("series_dir", ".")) / DURATIONS_FILE
    written = {**found, **({TESTS_KEY: listed} if listed else {})}
    write_atomic(target, (json.dumps(written, indent=1, sort_keys=True) + "\n").encode())
    info(f"wrote {target}: {len(found)} test file(s) and test(s), {sum(found.values()):.0f} s recorded; "
         f"the test ids of {len(listed)} slow file(s)")  # fmt: skip
    return 0


# --------------------------------------------------------------------------- wiring (cli.py adds it)

ci_app = typer.Typer(help="CI pipelines for the audit, and the durations --shard balances by.")
_CONFIG = typer.Option("--config", help="patchkit.toml whose [target] is the base")


def _invoke(fn, *args) -> None:
    """A user error is one line and its exit code, as for every other verb."""
    try:
        code = fn(*args)
    except UserError as exc:
        print(f"patchkit: error: {exc.line()}", file=sys.stderr)
        raise typer.Exit(exc.exit_code) from None
    raise typer.Exit(code)


@ci_app.command("buildkite")
def ci_buildkite(
    series_dir: Annotated[Optional[Path], typer.Argument(help="series dir (default: [series].dir)")] = None,
    pin: Annotated[Optional[Path], _CONFIG] = None,
    base: Annotated[Optional[Path], typer.Option(help="base source tree (default: the pinned base)")] = None,
    shards: Annotated[int, typer.Option(help="test shards (--shard I/N steps)")] = 4,
    out: Annotated[Optional[Path], typer.Option(help="write the pipeline JSON here (else stdout)")] = None,
    queue: Annotated[Optional[str], typer.Option(help="agents queue of the shard and report steps")] = None,
    gpu_queue: Annotated[str, typer.Option(help="agents queue of the GPU steps")] = "gpu",
    install: Annotated[
        str,
        typer.Option(
            help="the step's install command (default: vllm-patchkit at $PATCHKIT_GIT@$PATCHKIT_REV)"
        ),
    ] = "",
) -> None:
    """A Buildkite pipeline: a step per test shard, a GPU step per patch, the report merge."""
    _invoke(buildkite, series_dir, pin, base, shards, out, queue, gpu_queue, install)


@ci_app.command("durations")
def ci_durations(
    record: Annotated[Path, typer.Argument(help="an audit JSON with the tests gate")],
    out: Annotated[Optional[Path], typer.Option(help="default: <series dir>/test-durations.json")] = None,
) -> None:
    """Write the test durations of an audit record, which --shard balances by."""
    _invoke(durations, record, out)
