"""lint gate: the hooks of the base's own ``.pre-commit-config.yaml`` (read as YAML, ``tools/precommit``)
on the files a patch touches, each at the version the base pins (``tools/hook_tools`` installs it
once into the cache), and the base's ``local`` hooks run from a tree laid out as the base with the
touched files in place. Baseline-relative: every hook runs on the touched files before and after
the patch; only findings the patch adds count.

pre-commit is not the runner: it clones every hook repo from GitHub (unreachable here, and a network
dependency of every audit); the registries ship the same tools at the same versions.

A hook fails as under pre-commit: non-zero exit, or it changed a file (``--fix``, ``-i``, formatters).
Its findings are its output lines (root paths removed, numbers masked so shifted lines are not
new) and, for each changed file, the lines it would change. Hooks of other stages (``commit-msg``:
``signoff-commit``) are not run: the DCO gate reads sign-offs, and patchkit never writes one.
``mypy`` is not run unless ``PATCHKIT_LINT_HOOKS`` names it (or is ``all``): it needs vLLM's typed
dependencies and takes minutes per patch (README, patchkit.toml)."""

from __future__ import annotations

import difflib
import os
import re
import tempfile
import time
from collections import Counter
from pathlib import Path

from patchkit import git
from patchkit.audit.gates import Gate, GateContext, PatchUnderAudit, Trees, gate_result, not_applied, witness
from patchkit.audit.gates.ruff import shadow_tree
from patchkit.audit.model import GateResult
from patchkit.errors import UserError
from patchkit.proc import TimeoutExpired, run_process
from patchkit.tools import hook_tools, precommit
from patchkit.values import Message

HOOK_TIMEOUT = 600
SLOW_BY_DEFAULT = ("mypy",)  # run only when PATCHKIT_LINT_HOOKS names them
REPORT_ARGS = {"typos": ["--format", "brief"]}  # one finding per line; the verdict is the same
LINT_GATE_FORMAT = 2
NOT_RUN = {"findings": [], "said": [], "failed": False}  # no touched file existed before the patch


def _wanted_slow() -> set[str]:
    said = {h.strip() for h in os.environ.get("PATCHKIT_LINT_HOOKS", "").split(",") if h.strip()}
    return set(SLOW_BY_DEFAULT) if "all" in said else said


def command_of(hook: precommit.Hook) -> list[str]:
    """The hook's command line without filenames (installing its tool when needed)."""
    if hook.why_not:
        raise UserError(hook.why_not)
    args = [*hook.args, *REPORT_ARGS.get(hook.id, [])]
    if hook.tool is not None:
        return [str(hook_tools.executable(hook.tool)), *hook.entry[1:], *args]
    entry = list(hook.entry)
    if not entry:
        raise UserError("no entry")
    if hook.language == "python":
        if entry[0] in ("python", "python3"):
            entry[0] = str(hook_tools.python_env(hook.additional_dependencies))
        else:
            entry[0] = str(hook_tools.python_env(hook.additional_dependencies).parent / entry[0])
    elif hook.language == "script":
        entry[0] = f"./{entry[0]}"
    elif hook.language != "system":
        raise UserError(f"language {hook.language} is not supported")
    return [*entry, *args]


def _mask(text: str, root: Path) -> str:
    text = text.replace(str(root.resolve()) + "/", "").replace(str(root) + "/", "").replace("./", "")
    return re.sub(r"\d+", "N", text).strip()


def _run(cmd: list[str], root: Path, files: list[str], hook: precommit.Hook, watched: list[str]) -> dict:
    """One hook on one side: exit, output lines and changed lines; the files are restored after."""
    before = {p: (root / p).read_bytes() for p in watched if (root / p).is_file()}
    env = {**os.environ, "PRE_COMMIT": "1", "GIT_DIR": str(root / ".git"), "GIT_WORK_TREE": str(root)}
    if os.path.isabs(cmd[0]):  # the hook's environment first on PATH, as pre-commit does
        env["PATH"] = os.pathsep.join([str(Path(cmd[0]).parent), env.get("PATH", "")])
    try:
        proc = run_process(
            [*cmd, *(files if hook.pass_filenames else [])],
            cwd=root,
            text=True,
            errors="replace",
            timeout=HOOK_TIMEOUT,
            env=env,
        )
    except FileNotFoundError as exc:
        raise UserError(f"cannot start {cmd[0]}: {exc.strerror}") from None
    except TimeoutExpired:
        raise UserError(f"timed out after {HOOK_TIMEOUT} s") from None
    changed = []
    for path, data in before.items():
        now = (root / path).read_bytes()
        if now != data:
            old, new = (
                data.decode("utf-8", "replace").splitlines(),
                now.decode("utf-8", "replace").splitlines(),
            )
            for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, old, new).get_opcodes():
                lines = old[i1:i2] or ["(insertion)"]
                changed += [f"{path}: {hook.id} changes: {line.strip()}" for line in lines if tag != "equal"]
            (root / path).write_bytes(data)
    output = [_mask(line, root) for line in (proc.stdout + "\n" + proc.stderr).splitlines()]
    failed = proc.returncode != 0 or bool(changed)
    findings = [line for line in output if line] + [_mask(c, Path("/-")) for c in changed] if failed else []
    if failed and not findings:
        findings = [f"exit {proc.returncode}"]
    crashed = next((line for line in reversed(output) if _CRASH.search(line)), "") if failed else ""
    return {
        "exit": proc.returncode,
        "failed": failed,
        "findings": findings,
        "said": [line for line in output if line] if not failed else [],  # banners, advisory notes
        "crashed": crashed,
        "changed": sorted({c.split(": ", 1)[0] for c in changed}),
    }


_CRASH = re.compile(
    r"^(Traceback \(most recent call last\)|\w*(Error|Exception): |.*: command not found$|"
    r".*No such file or directory)"
)


def _added(before: list[str], after: list[str]) -> list[str]:
    budget = Counter(before)
    added = []
    for line in after:
        if budget[line]:
            budget[line] -= 1
        else:
            added.append(line)
    return added


def _tree(base_root: Path, overlay: dict, dest: Path) -> None:
    shadow_tree(base_root, overlay, dest)
    env = {**os.environ, "GIT_DIR": str(dest / ".git"), "GIT_WORK_TREE": str(dest)}
    for cmd in (["init", "-q"], ["add", "-A"]):  # hooks that ask `git ls-files`
        git.call(cmd, dest, env=env, timeout=120, own_group=False)


def lint_gate(patch: PatchUnderAudit, trees: Trees) -> GateResult:
    started = time.perf_counter()
    if trees.post is None:
        return not_applied("lint", None)

    def done(status: str, key: str, params: dict, details: dict, evidence: list | None = None) -> GateResult:
        return gate_result(
            "lint", status, Message(key, params), details, time.perf_counter() - started, evidence
        )

    text = trees.base.read(precommit.CONFIG)
    if text is None:
        return done("could-not-run", "gate.lint.no-config", {"config": precommit.CONFIG}, {})
    try:
        config = precommit.parse(text.decode("utf-8", "replace"))
    except UserError as exc:
        return done("could-not-run", "gate.lint.bad-config", {"error": str(exc)}, {})
    pre_files = sorted(
        {fp.old_path for fp in patch.changed_files if fp.old_path and trees.pre_read(fp.old_path)}
    )
    post_files = sorted(
        {fp.new_path for fp in patch.changed_files if fp.new_path and trees.post_read(fp.new_path)}
    )
    slow = _wanted_slow()
    hooks: list[dict] = []
    evidence = []
    with tempfile.TemporaryDirectory(prefix="patchkit-lint-") as tmp:
        roots: dict[str, Path] = {}

        def root(side: str) -> Path:
            if side not in roots:
                files, read = (pre_files, trees.pre_read) if side == "pre" else (post_files, trees.post_read)
                roots[side] = Path(tmp, side)
                _tree(trees.base.root, {p: read(p) for p in files}, roots[side])
            return roots[side]

        for hook in config.hooks:
            row = {"hook": hook.id, "repo": hook.repo, "version": hook.version}
            if not precommit.runs_at_commit(hook, config):
                hooks.append({**row, "status": "other-stage", "why": ", ".join(hook.stages)})
                continue
            pre_sel = [f for f in pre_files if precommit.selects(hook, config, f, trees.pre_read(f))]
            post_sel = [f for f in post_files if precommit.selects(hook, config, f, trees.post_read(f))]
            if not post_sel and not hook.always_run:
                hooks.append({**row, "status": "not-selected"})
                continue
            if hook.id in SLOW_BY_DEFAULT and hook.id not in slow:
                hooks.append({**row, "status": "not-run-by-default", "why": "PATCHKIT_LINT_HOOKS"})
                continue
            try:
                cmd = command_of(hook)
                after = _run(cmd, root("post"), post_sel, hook, post_files)
                run_pre = pre_sel or hook.always_run
                before = _run(cmd, root("pre"), pre_sel, hook, pre_files) if run_pre else NOT_RUN
            except UserError as exc:
                hooks.append({**row, "status": "could-not-run", "why": str(exc)})
                continue
            if after.get("crashed") and before.get(
                "crashed"
            ):  # failing the same way on the base: it did not run
                hooks.append(
                    {**row, "status": "could-not-run", "why": f"crashes on the base too: {after['crashed']}"}
                )
                continue
            # what the base side printed without failing (banners, counts) is not the patch's either
            added = _added(before["findings"] + before["said"], after["findings"]) if after["failed"] else []
            if after["failed"] and not before["failed"] and not added:
                added = [f"exit {after['exit']} (exit 0 without the patch)"]
            status = "failed" if added else "passed"
            hooks.append(
                {
                    **row,
                    "status": status,
                    "files": post_sel,
                    "exit": after["exit"],
                    "changed": after["changed"],
                    "findings": added[:50],
                }
            )
            counts = {
                "files": len(post_sel),
                "findings_before": len(before["findings"]),
                "findings_after": len(after["findings"]),
                "findings_added": len(added),
            }
            shown = [Path(cmd[0]).name if hook.tool else cmd[0], *cmd[1:], "{selected files}"]
            said = f"exit {after['exit']}" + (
                f", changed {len(after['changed'])} file(s)" if after["changed"] else ""
            )
            evidence.append(
                witness(
                    f"{hook.id} ({hook.tool.package if hook.tool else hook.repo})",
                    said,
                    version=hook.version,
                    command=shown,
                    inputs=post_sel,
                    counts=counts,
                )
            )
    details = {"config": precommit.CONFIG, "hooks": hooks, "files": post_files}
    failed = [h for h in hooks if h["status"] == "failed"]
    missing = [h for h in hooks if h["status"] == "could-not-run"]
    ran = [h for h in hooks if h["status"] in ("passed", "failed")]
    names = [f"{h['hook']} {h['version']}".strip() for h in ran]
    if failed:
        said = [f"{h['hook']} {h['version']}".strip() + f" ({len(h['findings'])})" for h in failed]
        return done(
            "failed",
            "gate.lint.failed",
            {"count": len(failed), "hooks": said, "ran": names},
            details,
            evidence,
        )
    if missing:
        said = [f"{h['hook']}: {h['why']}" for h in missing]
        return done(
            "could-not-run",
            "gate.lint.could-not-run",
            {"hooks": said, "ran": names or ["-"]},
            details,
            evidence,
        )
    if not ran:
        return done(
            "passed",
            "gate.lint.none-selected",
            {"count": len(post_files)},
            details,
            [
                witness(
                    "pre-commit file selection",
                    "no hook selects the touched files",
                    inputs=post_files,
                    counts={"files": len(post_files)},
                )
            ],
        )
    skipped = [h["hook"] for h in hooks if h["status"] == "not-run-by-default"] or ["-"]
    params = {"count": len(ran), "hooks": names, "skipped": skipped}
    return done("passed", "gate.lint.clean", params, details, evidence)


def _cache_config(ctx: GateContext) -> object:
    config = ctx.trees.base.read(precommit.CONFIG)
    return [LINT_GATE_FORMAT, sorted(_wanted_slow()), (config or b"").decode("utf-8", "replace")]


GATE = Gate("lint", lambda ctx: lint_gate(ctx.patch, ctx.trees), cache_config=_cache_config)
