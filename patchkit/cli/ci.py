"""``patchkit ci``: CI pipelines for the audit (``buildkite``) and the durations file ``--shard``
balances by (``durations``)."""

# No ``from __future__ import annotations``: typer reads these annotations.
from pathlib import Path
from typing import Annotated, Optional

import typer

from patchkit.cli.options import CONFIG, SERIES, invoke
from patchkit.cli.root import app

ci_app = typer.Typer(help="CI pipelines for the audit, and the durations --shard balances by.")
app.add_typer(ci_app, name="ci")


@ci_app.command("buildkite")
def ci_buildkite(
    series_dir: Annotated[Optional[Path], SERIES] = None,
    config: Annotated[Optional[str], CONFIG] = None,
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
    invoke("ci", locals(), "buildkite", "BuildkiteOptions")


@ci_app.command("durations")
def ci_durations(
    record: Annotated[Path, typer.Argument(help="an audit JSON with the tests gate")],
    out: Annotated[Optional[Path], typer.Option(help="default: <series dir>/test-durations.json")] = None,
) -> None:
    """Write the test durations of an audit record, which --shard balances by."""
    invoke("ci", locals(), "durations", "DurationsOptions")
