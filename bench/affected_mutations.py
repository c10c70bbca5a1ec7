"""Mutation witness of ``--select affected``: small regressions injected into the own series' patches.

Each mutation edits one line of a patch's text: an added line (``+``) is rewritten, or a context line
(`` ``) becomes a removed line and a rewritten added one (the hunk's counts stay right), so the
mutated patch changes the code its focused tests exercise — a wrong constant, a dropped branch, a
swapped argument. Each mutated series (the mutated patch after the patches it needs) is written to
a temporary directory and audited in this process three ways, on the test files ``--files`` names
for its patch (the selection restricted to them, said in the output):

- full: both sides in full (the base's outcomes of the restricted selection, cached per path),
  compared by ``testselect.compare``: a test regressed (passed or skipped on the base, fails with
  the mutated patch) or a test the patch adds fails (``new-failed``);
- default: the tests gate as ``patchkit audit`` runs it (base on demand): ``regressed`` or
  ``new-failed`` > 0;
- affected: the tests gate with ``--select affected``: the same, and how many tests it left out
  (where it leaves none out it runs the default's selection, and that run stands for it).

Every mutation the full comparison catches must be caught by ``--select affected``. Gate results are
never cached here (and their key names the restriction, never the real series' key); coverage maps
and base outcomes are cached per path, as the audit keeps them.

    python -m bench.affected_mutations --files FILES.json [--only ID,...] [--json OUT]

FILES.json: {"0001-tool-parser.patch": ["tests/tool_parsers/test_x.py", ...], ...}.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from patchkit.audit.engine import AuditOptions, load_patches, run_audit
from patchkit.audit.gates import apply_patch
from patchkit.audit.gates import registry as gate_registry
from patchkit.audit.gates import tests as tests_gate
from patchkit.base.tree import BaseTree
from patchkit.project import Project
from patchkit.split.rules import load_rules
from patchkit.testrun import basesides
from patchkit.testrun.pytestrun import TestSettings, environment
from patchkit.testrun.testselect import compare

REPO = Path(__file__).resolve().parents[1]
TARGET: list[str] = []  # the mutated patch: the only one whose tests run


@dataclasses.dataclass(frozen=True)
class Mutation:
    id: str
    patch: str  # file name in the series
    file: str  # the patched file the line belongs to
    old: str  # the line as the patch has it (without its +/space prefix)
    new: str  # what it becomes
    kind: str  # constant | branch | argument | dropped | operator


TP, PC, SD, SV = (
    "0001-tool-parser.patch",
    "0002-prefix-caching.patch",
    "0003-spec-decode.patch",
    "0004-serving.patch",
)
PARSER, ENVS = "vllm/tool_parsers/qwen3_engine_tool_parser.py", "vllm/envs.py"
POOL, SPEC, API = (
    "vllm/v1/core/block_pool.py",
    "vllm/config/speculative.py",
    "vllm/entrypoints/openai/api_server.py",
)
PROXY = "examples/disaggregated/disaggregated_encoder/disagg_epd_proxy.py"
_IS_FN = '    if not isinstance(tool, dict) or tool.get("type", "function") != "function":'
_INIT_IF = "        if tools and envs.VLLM_QWEN3_CODER_NORMALIZE_DICT_TOOLS:"
# fmt: off
MUTATIONS = [Mutation(*row) for row in (
    ("tp-type-eq", TP, PARSER, _IS_FN, _IS_FN.replace("!=", "=="), "operator"),
    ("tp-type-default", TP, PARSER, _IS_FN, _IS_FN.replace('"type", "function"', '"type", "tool"'),
     "constant"),
    ("tp-isinstance", TP, PARSER, _IS_FN, _IS_FN.replace("if not isinstance", "if isinstance"), "branch"),
    ("tp-nested-not", TP, PARSER, '    if "function" in tool:', '    if "function" not in tool:', "branch"),
    ("tp-nested-raw", TP, PARSER, "        return ChatCompletionToolsParam.model_validate(tool)",
     "        return tool", "dropped"),
    ("tp-flat-type", TP, PARSER, '    return FunctionTool.model_validate({**tool, "type": "function"})',
     '    return FunctionTool.model_validate({**tool, "type": "custom"})', "constant"),
    ("tp-flat-raw", TP, PARSER, '    return FunctionTool.model_validate({**tool, "type": "function"})',
     "    return tool", "dropped"),
    ("tp-init-off", TP, PARSER, _INIT_IF, "        if False:", "branch"),
    ("tp-init-slice", TP, PARSER, "            tools = [normalize_tool(tool) for tool in tools]",
     "            tools = [normalize_tool(tool) for tool in tools[1:]]", "constant"),
    ("tp-super-none", TP, PARSER, "        super().__init__(tokenizer, tools, **kwargs)",
     "        super().__init__(tokenizer, None, **kwargs)", "argument"),
    ("tp-env-default", TP, ENVS, '        int(os.getenv("VLLM_QWEN3_CODER_NORMALIZE_DICT_TOOLS", "1"))',
     '        int(os.getenv("VLLM_QWEN3_CODER_NORMALIZE_DICT_TOOLS", "0"))', "constant"),
    ("tp-env-not", TP, ENVS, '    "VLLM_QWEN3_CODER_NORMALIZE_DICT_TOOLS": lambda: bool(',
     '    "VLLM_QWEN3_CODER_NORMALIZE_DICT_TOOLS": lambda: not bool(', "operator"),
    ("pc-evict-2", PC, POOL, "        self.num_evicted_blocks += 1", "        self.num_evicted_blocks += 2",
     "constant"),
    ("pc-evict-drop", PC, POOL, "        self.num_evicted_blocks += 1", "        pass", "dropped"),
    ("pc-reset-1", PC, POOL, "        self.num_evicted_blocks = 0", "        self.num_evicted_blocks = 1",
     "constant"),
    ("pc-reset-drop", PC, POOL, "        self.num_evicted_blocks = 0", "        pass", "dropped"),
    ("pc-init-1", PC, POOL, "        self.num_evicted_blocks: int = 0",
     "        self.num_evicted_blocks: int = 1", "constant"),
    ("pc-evict-false", PC, POOL, "            return False", "            return True", "constant"),
    ("pc-events-drop", PC, POOL, "        self._emit_block_removed_events(evicted_hashes)", "        pass",
     "dropped"),
    ("pc-metrics-not", PC, POOL, "        if self.metrics_collector:",
     "        if not self.metrics_collector:", "branch"),
    ("pc-metrics-none", PC, POOL, "        self.metrics_collector = metrics_collector",
     "        self.metrics_collector = None", "argument"),
    ("pc-queue", PC, POOL, "        self.kv_event_queue: list[KVCacheEvent] = []",
     "        self.kv_event_queue: list[KVCacheEvent] = [None]", "constant"),
    ("sd-gt-ge", SD, SPEC, "            if speculative_max_model_len > result:",
     "            if speculative_max_model_len >= result:", "operator"),
    ("sd-no-clamp", SD, SPEC, "                return result",
     "                return speculative_max_model_len", "dropped"),
    ("sd-wrong-return", SD, SPEC, "            return speculative_max_model_len",
     "            return result", "argument"),
    ("sd-max", SD, SPEC, "        result = min(", "        result = max(", "operator"),
    ("sd-none", SD, SPEC, "        if speculative_max_model_len is not None:",
     "        if speculative_max_model_len is None:", "branch"),
    ("sd-draft-plus", SD, SPEC, "            draft_max_model_len,", "            draft_max_model_len + 1,",
     "constant"),
    ("sv-env-5", SV, ENVS, '        os.environ.get("VLLM_HTTP_TIMEOUT_KEEP_ALIVE", "65")',
     '        os.environ.get("VLLM_HTTP_TIMEOUT_KEEP_ALIVE", "5")', "constant"),
    ("sv-env-float", SV, ENVS, '    "VLLM_HTTP_TIMEOUT_KEEP_ALIVE": lambda: int(',
     '    "VLLM_HTTP_TIMEOUT_KEEP_ALIVE": lambda: float(', "argument"),
    ("sv-proxy-5", SV, PROXY,
     '    server_keep_alive = float(os.getenv("VLLM_HTTP_TIMEOUT_KEEP_ALIVE", "65"))',
     '    server_keep_alive = float(os.getenv("VLLM_HTTP_TIMEOUT_KEEP_ALIVE", "5"))', "constant"),
    ("sv-warn-space", SV, API, '    "`vllm.entrypoints.openai.api_server` is deprecated and will likely be "',
     '    "`vllm.entrypoints.openai.api_server` is deprecated and will likely be"', "constant"),
    ("sv-warn-text", SV, API, '    "unsupported in a future version. Use the corresponding function from "',
     '    "unsupported in a later version. Use the corresponding function from "', "constant"),
    ("sv-env-name", SV, ENVS, '        os.environ.get("VLLM_HTTP_TIMEOUT_KEEP_ALIVE", "65")',
     '        os.environ.get("VLLM_HTTP_KEEP_ALIVE", "65")', "argument"),
)]
# fmt: on


def mutate(text: str, m: Mutation) -> str:
    """The patch text with ``m`` applied: exactly one matching ``+`` or context line in its file."""
    lines, current, hits = text.split("\n"), None, []
    for i, line in enumerate(lines):
        if line.startswith("diff --git "):
            current = line.split(" b/", 1)[-1]
        elif (
            current == m.file and line[:1] in ("+", " ") and line[1:] == m.old and not line.startswith("+++")
        ):
            hits.append(i)
    if len(hits) != 1:
        raise SystemExit(f"{m.id}: {len(hits)} lines of {m.file} in {m.patch} read {m.old!r}")
    i = hits[0]
    lines[i : i + 1] = ["+" + m.new] if lines[i][0] == "+" else ["-" + m.old, "+" + m.new]
    return "\n".join(lines)


def write_series(series: Path, m: Mutation, dest: Path) -> Path:
    """The mutated patch after the patches it needs (split.json kept), in ``dest``."""
    patches = load_patches(series, load_rules(None))
    mine = next(p for p in patches if p.name == m.patch)
    keep = [p.name for p in patches if p.name in (mine.declared_needs or [])] + [m.patch]
    dest.mkdir(parents=True)
    for name in keep:
        text = (series / name).read_text("utf-8")
        (dest / name).write_text(mutate(text, m) if name == m.patch else text, "utf-8")
    shutil.copy2(series / "split.json", dest / "split.json")
    (dest / "series").write_text("".join(f"{n}\n" for n in keep), "utf-8")
    return dest


def restrict(files: dict[str, list[str]]):
    """The tests gate with each patch's selection cut to ``files`` (and a cache key that says so)."""
    real_select = tests_gate.selection_for

    def selection_for(patch, exists):
        selection, elsewhere = real_select(patch, exists)
        if TARGET and patch.name != TARGET[0]:  # a patch the mutated one needs: no tests (not measured)
            return [], []
        mine = files.get(patch.name, [])
        return [f for f in mine if any(tests_gate.under_path(f, s) for s in selection)], elsewhere

    tests_gate.selection_for = selection_for
    real = gate_registry.REGISTRY["tests"]
    keyed = dataclasses.replace(
        real, cache_config=lambda ctx: [real.cache_config(ctx), "bench-restricted", files]
    )
    gate_registry.REGISTRY["tests"] = keyed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.affected_mutations")
    parser.add_argument("--files", type=Path, required=True)
    parser.add_argument("--only", default="")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--series", type=Path, default=REPO / "patches")
    args = parser.parse_args(argv)
    files = json.loads(args.files.read_text())
    restrict(files)
    config = Project(REPO).config
    from patchkit.base.pin import prepare_base
    from patchkit.testrun import testenv

    root = prepare_base(config.target)
    base, pin = BaseTree(root), config.target
    python = testenv.prepare(root, torch=config.audit.torch)
    chosen = [m for m in MUTATIONS if not args.only or m.id in args.only.split(",")]
    rows, scratch = [], Path(tempfile.mkdtemp(prefix="pk-mutations-"))
    env_info = environment(python)
    for m in chosen:
        series = write_series(args.series, m, scratch / m.id)
        TARGET[:] = [m.patch]
        row = {"id": m.id, "patch": m.patch, "kind": m.kind, "files": files.get(m.patch, [])}
        settings = TestSettings(python=python, base_root=root, base_hash=pin.tree_hash or "",
                                test_timeout=config.audit.test_timeout,
                                per_test_timeout=config.audit.per_test_timeout)  # fmt: skip
        row["upstream"], result, captured = _gate(series, base, pin, settings)
        gate = next(g for g in result.patches[-1].gates if g.gate == "tests")
        if captured:  # both sides in full: the base's whole run of the restricted selection
            row["full"] = _full(settings, base, series, env_info, captured, scratch / m.id, gate)
        left = _left_out(settings, env_info, base, series, gate.details.get("selection", []), scratch / m.id)
        row["left_out_by_map"] = left
        if left:  # --select affected runs fewer tests than the default: run it
            row["affected"], _, _ = _gate(series, base, pin, dataclasses.replace(settings, select="affected"))
        else:  # it would run exactly the default's selection (0 left out): the same run
            row["affected"] = {**row["upstream"], "same_selection_as_default": True}
        row["caught"] = {k: bool(row[k]["regressed"] + row[k]["new_failed"])
                         for k in ("full", "upstream", "affected") if k in row}  # fmt: skip
        rows.append(row)
        print(json.dumps({"id": m.id, **row["caught"], "left_out": left,
                          "ran": row["affected"].get("ran")}), flush=True)  # fmt: skip
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1) + "\n")
    shutil.rmtree(scratch, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    missed = [r["id"] for r in rows if r["caught"].get("full") and not r["caught"]["affected"]]
    print(
        f"{len(rows)} mutations; full caught {sum(r['caught'].get('full', False) for r in rows)}, default "
        f"{sum(r['caught']['upstream'] for r in rows)}, "
        f"affected {sum(r['caught']['affected'] for r in rows)}; "
        f"caught by full but missed by affected: {missed or 'none'}"
    )
    return 1 if missed else 0


def _gate(series: Path, base: BaseTree, pin, settings: TestSettings):
    """The tests gate of the series' last patch as ``patchkit audit`` runs it; (its figures, the audit,
    the patched outcomes)."""
    captured: dict = {}
    real_side = basesides.run_side

    def capture(*a, **k):
        out = real_side(*a, **k)
        if a[5].startswith("patch") and isinstance(out, dict):
            captured.update(out)
        return out

    basesides.run_side = capture
    started = time.perf_counter()
    try:
        # no gate cache: every run is a fresh run (base outcomes and maps stay cached per path)
        options = AuditOptions(["apply", "tests"], jobs=1, use_cache=False, settings={"tests": settings})
        result = run_audit(series, base, pin, load_rules(None), options)
    finally:
        basesides.run_side = real_side
    gate = next(g for g in result.patches[-1].gates if g.gate == "tests")
    counts = dict(gate.details.get("counts", {}))
    figures = {"status": gate.status, "regressed": counts.get("regressed", 0),
               "new_failed": counts.get("new-failed", 0), "cached": gate.cached,
               "seconds": round(time.perf_counter() - started, 1), "groups": gate.details.get("groups"),
               "tests": counts, "ran": sum(gate.details.get("patched", {}).values()),
               "regressed_ids": gate.details.get("tests", {}).get("regressed", [])[:10]}  # fmt: skip
    return figures, result, captured


def _left_out(settings, env_info, base, series, selection, work) -> int:
    """How many tests ``--select affected`` leaves out of ``selection`` (the map built if missing)."""
    from patchkit.testrun import covermap
    from patchkit.testrun.affected import changes, split

    maps = covermap.load(settings, env_info, selection)
    if missing := [p for p in selection if p not in maps]:
        built = covermap.build(settings, env_info, missing, work / "map", lambda *a, **k: None, "bench")
        if not isinstance(built, dict):
            return 0
        maps.update(built)
    patches = load_patches(series, load_rules(None))
    pre: dict = {}
    for p in patches[:-1]:
        apply_patch(p, base.read, pre)
    post = dict(pre)
    apply_patch(patches[-1], base.read, post)
    return len(split(maps, changes(base.read, pre, post)).unaffected)


def _full(settings, base, series, env_info, patched, work, gate) -> dict:
    """Both sides in full: the base (+ the patches this one needs) over the whole restricted selection."""
    patches = load_patches(series, load_rules(None))
    pre: dict = {}
    for p in patches[:-1]:
        apply_patch(p, base.read, pre)
    selection = gate.details.get("selection", [])
    work.mkdir(parents=True, exist_ok=True)
    base_side, _ = basesides.baseline(settings, pre, selection, env_info, work / "full", lambda *a, **k: None)
    if not isinstance(base_side, dict) or not patched:
        return {"regressed": 0, "new_failed": 0, "error": "no outcomes"}
    cmp = compare(base_side, patched)
    return {
        "regressed": cmp.count("regressed"),
        "new_failed": cmp.count("new-failed"),
        "ids": (cmp.rows.get("regressed", []) + cmp.rows.get("new-failed", []))[:10],
    }


if __name__ == "__main__":
    sys.exit(main())
