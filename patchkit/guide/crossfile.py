"""Findings across the patch: environment variables, tests touched, files commit messages name."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from patchkit.diff.model import Commit, FilePatch
from patchkit.guide.findings import call_name, changed, is_literal, make_finding
from patchkit.guide.model import Finding
from patchkit.guide.view import FileView, NodeIndex
from patchkit.values import message

_NEGATED = re.compile(
    r"untouched|unchanged|not (?:touch|modif|chang)|not via|left (?:alone|as is)|no changes? to"
    r"|does not change|already (?:in|built)|no need"
    r"|不改|未修改|未改动|不动|保持不变|无改动|没有改|不经|无需|不需要|已内置|内置",
    re.I,
)
_STOPS = (".", "。", ":", "：", ";", "；", "!", "！", "?", "？")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])")
_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s")
_FILE_MENTION = re.compile(
    r"(?<![\w./-])((?:[\w.-]+/)*[\w-]+\.(?:py|pyi|toml|yaml|yml|json|cu|cuh|cpp|h|sh))\b"
)


@dataclass(frozen=True)
class EnvRead:
    """How a module reads one environment variable."""

    default: str | None  # what it is when unset, as written; None: no default
    line: int
    via: tuple[str, ...] = ()  # variables read first in its place (a legacy name), outermost first
    rank: int = 0  # 2 a read with a default, 1 an envs.py annotation, 0 a read without one


def _env_defaults(nodes: NodeIndex) -> dict[str, EnvRead]:
    """Environment variables a module reads (os.getenv, os.environ.get/[...], envs.py tables). The
    read itself wins over envs.py's ``VLLM_X: int = 1`` annotation: only the read runs."""
    found: dict[str, EnvRead] = {}

    def keep(name: str, read: EnvRead) -> None:
        if name not in found or found[name].rank < read.rank:
            found[name] = read

    for node in nodes.of(ast.Call, ast.Subscript, ast.AnnAssign):
        if isinstance(node, ast.Call) and node.args and _is_env_call(node):
            name = node.args[0]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                given = _default_arg(node)
                default, via = _env_default(given) if given is not None else (None, ())
                keep(name.value, EnvRead(default, node.lineno, via, 2 if default is not None else 0))
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            base, key = node.value, node.slice
            if isinstance(base, ast.Attribute) and base.attr == "environ" and isinstance(key, ast.Constant):
                keep(str(key.value), EnvRead(None, node.lineno))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            name = node.target.id  # envs.py declares `VLLM_X: int = 1` under TYPE_CHECKING
            if name.startswith("VLLM_") and node.value is not None and is_literal(node.value):
                keep(name, EnvRead(ast.unparse(node.value), node.lineno, rank=1))
    return found


def _is_env_call(node: ast.Call) -> bool:
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr == "get":
        return isinstance(func.value, ast.Attribute) and func.value.attr == "environ"
    return call_name(node) in ("getenv", "env_with_choices", "env_list_with_choices")


def _default_arg(call: ast.Call) -> ast.AST | None:
    """The default of an env read: its second argument or its ``default=`` keyword."""
    if len(call.args) > 1:
        return call.args[1]
    return next((k.value for k in call.keywords if k.arg == "default"), None)


def _env_default(node: ast.AST) -> tuple[str | None, tuple[str, ...]]:
    """A read's default argument: the literal it ends in, and the variables read on the way there
    (``os.getenv("NEW", os.getenv("OLD", "1"))``: ``'1'`` via ``OLD``)."""
    if isinstance(node, ast.Call) and _is_env_call(node) and node.args:
        name = node.args[0]
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            given = _default_arg(node)
            default, via = _env_default(given) if given is not None else (None, ())
            return default, (name.value, *via)
    return (repr(node.value) if isinstance(node, ast.Constant) else ast.unparse(node)), ()


def _shown_default(read: EnvRead) -> str | dict:
    """The default as a reader needs it: the fallback variables first, then the literal."""
    shown: str | dict = read.default if read.default is not None else message("env.no-default")
    for name in reversed(read.via):
        shown = message("env.fallback", name=name, default=shown)
    return shown


def _differ(old: EnvRead, new: EnvRead) -> bool:
    """Different defaults, read the same way (an annotation's ``1`` is not a read's ``'1'``)."""
    return old.rank == new.rank and (old.default, old.via) != (new.default, new.via)


def env_findings(views: list[FileView]) -> list[Finding]:
    new: dict[str, tuple[EnvRead, str]] = {}
    out = []
    for view in views:
        before, after = _env_defaults(view.pre_nodes), _env_defaults(view.post_nodes)
        for name, read in after.items():
            old = before.get(name)
            if old is None:
                if name not in new or new[name][0].rank < read.rank:
                    new[name] = (read, view.path)
            elif old.default is not None and read.default is not None and _differ(old, read):
                shown_old, shown_new = _shown_default(old), _shown_default(read)
                out.append(changed("default-changed", "medium", view, read.line, name, shown_old, shown_new))
    for name, (read, path) in new.items():
        out.append(
            make_finding(
                "new-env-var", "medium", path, read.line, [], name=name, default=_shown_default(read)
            )
        )
    return out


def is_test(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return path.startswith("tests/") or "/tests/" in path or name.startswith("test_")


def test_findings(files: list[FilePatch], views: list[FileView] | None = None) -> list[Finding]:
    """Behaviour changed in vllm/ with no test touched. A file that is not Python (a template, a
    JSON table) counts only when the patch's Python code names it."""
    python = "\n".join(
        text
        for v in views or []
        if v.path.endswith(".py")
        for text in (*v.added.values(), *v.removed.values())
    )
    legacy = views is None  # callers that pass no views: every vllm/ file counts
    code = [
        fp.path
        for fp in files
        if fp.path.startswith("vllm/")
        and not is_test(fp.path)
        and (legacy or fp.path.endswith((".py", ".pyi")) or fp.path.rsplit("/", 1)[-1] in python)
    ]
    if not code or any(is_test(fp.path) for fp in files):
        return []
    return [make_finding("no-test-touched", "medium", code[0], 0, code[:8], count=len(code))]


def _sentences(lines: list[str]) -> list[list[str]]:
    """Consecutive lines joined while a sentence is wrapped: a line that ends without a stop, before a
    line that starts no list item; a blank line is a sentence of its own."""
    out: list[list[str]] = []
    for line in lines:
        last = out[-1][-1] if out else ""
        wrapped = last.strip() and not last.rstrip().endswith(_STOPS) and not _ITEM.match(line)
        if wrapped and line.strip():
            out[-1].append(line)
        else:
            out.append([line])
    return out


def _claimed_lines(text: str) -> list[str]:
    """The lines of a commit message that claim a change: not "left untouched" / "不改" (also when the
    negation is on a later line of the same wrapped sentence), nor the items under a negated heading
    ("已确认内置（无需重放）:") up to the next blank line."""
    out, negated_section = [], False
    for sentence in _sentences(text.splitlines()):
        if not sentence[0].strip():
            negated_section = False
        elif _NEGATED.search(joined := " ".join(line.strip() for line in sentence)):  # "is not\ntouched" too
            negated_section = negated_section or sentence[-1].rstrip().endswith((":", "："))
            if not negated_section:  # a wrapped line may hold a claim and a negation, one each
                out += [s for s in _SENTENCE_END.split(joined) if s.strip() and not _NEGATED.search(s)]
        elif not negated_section:
            out += sentence
    return out


def message_findings(
    files: list[FilePatch], commits: list[Commit | None], source_files: list[set[str]] | None
) -> list[Finding]:
    """A file a commit message names that the commit (or, not knowing better, the patch) never touched."""
    out = []
    own = {fp.path for fp in files} | {fp.old_path for fp in files if fp.old_path}
    for index, commit in enumerate(commits):
        if commit is None:
            continue
        touched = source_files[index] if source_files is not None else own
        text = f"{commit.subject}\n{commit.body}"
        claimed = "\n".join(_claimed_lines(text))  # "left untouched" is no claim
        for mention in dict.fromkeys(_FILE_MENTION.findall(claimed)):
            if not any(p == mention or p.endswith(f"/{mention}") for p in touched):
                line = next(ln for ln in claimed.splitlines() if mention in ln)
                out.append(
                    make_finding(
                        "message-names-untouched-file",
                        "low",
                        "",
                        0,
                        [line.strip()[:160]],
                        name=mention,
                        subject=commit.subject[:80],
                    )
                )
    return out
