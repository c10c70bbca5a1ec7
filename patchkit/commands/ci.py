"""``patchkit ci``: CI pipelines for the audit (``buildkite``) and the durations file ``--shard``
balances by (``durations``)."""

from __future__ import annotations

import json
from pathlib import Path

from patchkit.atomic import write_atomic
from patchkit.audit.testplan import DURATIONS_FILE, durations_from
from patchkit.config import load_config, project_config
from patchkit.errors import UserError
from patchkit.output import info
from patchkit.split.rules import load_rules


def buildkite(series_dir: Path | None, pin_file: Path | None, base: Path | None, shards: int,
              out: Path | None, queue: str | None, gpu_queue: str, install: str) -> int:  # fmt: skip
    from patchkit.base.pin import prepare_base
    from patchkit.base.tree import BaseTree
    from patchkit.pipelines.buildkite import accelerator_tests, pipeline

    if not 1 <= shards <= 256:
        raise UserError(f"--shards {shards}: expected 1..256")
    config = load_config(pin_file) if pin_file else project_config()
    series_dir = series_dir or config.series.dir
    if not (series_dir / "series").is_file():
        raise UserError("not a series directory (no 'series' file)", str(series_dir))
    tree = BaseTree(base if base is not None else prepare_base(config.target))  # the GPU steps' tests
    gpu = accelerator_tests(series_dir, tree, load_rules(config.series.rules))
    text = json.dumps(pipeline(str(series_dir), shards, gpu, install, queue, gpu_queue), indent=2) + "\n"
    if out is None or str(out) == "-":
        print(text, end="")
    else:
        write_atomic(out, text.encode())
        info(f"wrote {out}: {shards} shard step(s), {len(gpu)} GPU step(s), a report step")
    return 0


def durations(record: Path, out: Path | None) -> int:
    try:
        data = json.loads(record.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read audit record: {exc}", str(record)) from exc
    found = durations_from(data) if isinstance(data, dict) else {}
    if not found:
        raise UserError("the record has no tests gate durations (path_seconds)", str(record))
    target = out or Path(data.get("series_dir", ".")) / DURATIONS_FILE
    write_atomic(target, (json.dumps(found, indent=1, sort_keys=True) + "\n").encode())
    info(f"wrote {target}: {len(found)} test file(s), {sum(found.values()):.0f} s recorded")
    return 0
