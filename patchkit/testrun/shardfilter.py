"""A test shard's pytest runs keep only the shard's own tests of a file split by test id
(``testplan``): a small plugin, given the split files' tests and owners, deselects the others —
the same rule as ``testplan.owner`` (a test the plan does not know: the file's home shard)."""

from __future__ import annotations

import json
from pathlib import Path

from patchkit.testrun.testplan import owner, split_files
from patchkit.testrun.testselect import JUNIT_ID_SOURCE

PLUGIN = (
    """\
import json, os, re


"""
    + JUNIT_ID_SOURCE
    + """

def pytest_collection_modifyitems(session, config, items):
    with open(os.environ["PATCHKIT_SHARD"], encoding="utf-8") as f:
        plan = json.load(f)
    keep, drop = [], []
    for item in items:
        split = plan["split"].get(item.nodeid.split("::")[0])
        mine = split is None or split["ids"].get(_junit_id(item.nodeid), split["home"]) == plan["shard"]
        (keep if mine else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
"""
)


def shard_plugin(shard: tuple[int, int] | None, assignment: dict[str, int], tests: list[str],
                 where: Path) -> tuple[list[str], dict[str, str]]:  # fmt: skip
    """(pytest args, environment) that keep this shard's tests of the split files in ``tests``,
    the plugin written into ``where`` (the caller puts it on PYTHONPATH); nothing when none is split
    (the run's files are then the shard's own)."""
    if shard is None:
        return [], {}
    split = {f: ids for f, ids in split_files(assignment).items() if f in tests}
    if not split:
        return [], {}
    where.mkdir(exist_ok=True)
    (where / "patchkit_shard.py").write_text(PLUGIN, "utf-8")
    homes = {f: owner(f, assignment, shard[1]) for f in split}
    plan = {"shard": shard[0], "split": {f: {"home": homes[f], "ids": ids} for f, ids in split.items()}}
    (where / "shard.json").write_text(json.dumps(plan), "utf-8")
    return ["-p", "patchkit_shard"], {"PATCHKIT_SHARD": str(where / "shard.json")}
