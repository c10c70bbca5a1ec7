"""``patchkit ci``: CI pipelines for the audit (``buildkite``) and the durations file ``--shard``
balances by (``durations``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from patchkit.errors import UserError
from patchkit.project import Project


@dataclass
class BuildkiteOptions:
    series_dir: Path | None
    shards: int
    out: Path | None
    queue: str | None
    gpu_queue: str
    install: str


@dataclass
class DurationsOptions:
    record: Path
    out: Path | None


def buildkite(project: Project, options: BuildkiteOptions) -> int:
    from patchkit.atomic import write_atomic
    from patchkit.output import info
    from patchkit.pipelines.buildkite import INSTALL, accelerator_tests, pipeline
    from patchkit.split.rules import load_rules

    shards, out = options.shards, options.out
    if not 1 <= shards <= 256:
        raise UserError(f"--shards {shards}: expected 1..256")
    series_dir = project.series(options.series_dir)
    if not (series_dir / "series").is_file():
        raise UserError("not a series directory (no 'series' file)", str(series_dir))
    tree, _ = project.base(series_dir)  # the GPU steps' tests
    gpu = accelerator_tests(series_dir, tree, load_rules(project.config.series.rules))
    install, queue, gpu_queue = options.install, options.queue, options.gpu_queue
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


def durations(project: Project, options: DurationsOptions) -> int:
    from patchkit.atomic import write_atomic
    from patchkit.output import info
    from patchkit.testrun.testplan import DURATIONS_FILE, TESTS_KEY, durations_from, tests_from

    record, out = options.record, options.out
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
