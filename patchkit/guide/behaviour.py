"""Behaviour a patch changes quietly: settings forced in code, behaviour put behind a request flag,
an exception type changed, client data replacing a server value, CPU ids, a cache call removed, a
CLI flag added, a call passing an argument its callee does not accept."""

from __future__ import annotations

import ast
import re

from patchkit.guide.findings import call_name, make_finding
from patchkit.guide.model import Finding
from patchkit.guide.view import FileView

FORCED_HIGH = frozenset(
    {
        "enable_prefix_caching",
        "cudagraph_mode",
        "enforce_eager",
        "attention_backend",
        "backend",
        "use_cudagraph",
        "full_cuda_graph",
        "enable_chunked_prefill",
        "async_scheduling",
        "use_v2_block_manager",
        "disable_custom_all_reduce",
        "kv_cache_dtype",
        "block_size",
    }
)
_CONFIG_PART = re.compile(r"(^|_)(config|args|cfg)$")
_RAISE = re.compile(r"^\s*raise\s+([\w.]+)")
_AFFINITY_CALLS = {"sched_setaffinity", "cpu_affinity", "set_cpu_affinity", "setaffinity"}
_TASKSET = re.compile(r"\b(taskset\s+(-\w+\s+)*-c\s*|--physcpubind[= ]|--cpunodebind[= ])\d")
_ID_LIST = re.compile(r"^\s*\d+(\s*[,-]\s*\d+){2,}\s*$")
_CORE_WORD = re.compile(r"core|cpu|affinit", re.I)


def behaviour_findings(view: FileView) -> list[Finding]:
    out: list[Finding] = []
    if view.post is not None:
        out += _forced_settings(view)
        out += _cpu_ids(view)
        out += _cli_flags(view)
    out += _hunk_findings(view)
    return out


def dotted(node: ast.AST) -> list[str]:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif isinstance(node, ast.Call):
        parts.append(call_name(node) + "()")
    return parts[::-1]


def _forced_settings(view: FileView) -> list[Finding]:
    """``x.cache_config.enable_prefix_caching = False``: a setting of another config forced in code."""
    out = []
    made = {  # objects the patch itself creates (a deepcopy it then configures): nobody's setting
        ast.unparse(t) for n in view.post_nodes.of(ast.Assign) if n.lineno in view.added for t in n.targets
    }
    for node in view.post_nodes.of(ast.Assign, ast.AnnAssign):
        if node.lineno not in view.added or node.value is None:
            continue
        for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
            chain = dotted(target) if isinstance(target, ast.Attribute) else []
            owners = chain[1:-1] if chain[:1] == ["self"] else chain[:-1]
            if len(chain) < 2 or not any(_CONFIG_PART.search(p) for p in owners):
                continue
            if ast.unparse(target.value) in made:
                continue
            setting = ".".join(chain[-2:])
            value = ast.unparse(node.value)[:60]
            severity = "high" if chain[-1] in FORCED_HIGH else "medium"
            evidence = [view.added[node.lineno].strip()]
            out.append(
                make_finding(
                    "forced-setting", severity, view.path, node.lineno, evidence, setting=setting, value=value
                )
            )
    return out + _forced_by_setattr(view)


def _forced_by_setattr(view: FileView) -> list[Finding]:
    """``setattr(self.draft_model_config, name, value)``."""
    out = []
    for node in view.post_nodes.of(ast.Call):
        if node.lineno not in view.added or call_name(node) != "setattr" or len(node.args) != 3:
            continue
        chain = dotted(node.args[0])
        owners = chain[1:] if chain[:1] == ["self"] else chain
        if owners and _CONFIG_PART.search(owners[-1]):
            field = node.args[1]
            name = field.value if isinstance(field, ast.Constant) else f"<{ast.unparse(field)}>"
            setting, value = f"{owners[-1]}.{name}", ast.unparse(node.args[2])[:60]
            evidence = [view.added[node.lineno].strip()]
            out.append(
                make_finding(
                    "forced-setting", "medium", view.path, node.lineno, evidence, setting=setting, value=value
                )
            )
    return out


def _cpu_ids(view: FileView) -> list[Finding]:
    out = []
    for node in view.post_nodes.of(ast.Call, ast.Constant):
        if node.lineno not in view.added:
            continue
        if isinstance(node, ast.Call) and call_name(node) in _AFFINITY_CALLS:
            args = node.args[1:] if call_name(node) == "sched_setaffinity" else node.args  # not the pid
            literal = [
                n for a in args for n in ast.walk(a) if isinstance(n, ast.Constant) and type(n.value) is int
            ]
            fixed = [a for a in args if isinstance(a, (ast.List, ast.Set, ast.Tuple, ast.Call))]
            if not literal or not fixed:
                continue
        elif not (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and _cpu_list(node.value, view, node)
        ):
            continue
        evidence = [view.added[node.lineno].strip()]
        out.append(
            make_finding(
                "hard-coded-cpu-ids", "medium", view.path, node.lineno, evidence, what=evidence[0][:80]
            )
        )
    return out[:1] + [f for f in out[1:] if f.line != out[0].line]


def _cpu_list(text: str, view: FileView, node: ast.AST) -> bool:
    """``taskset -c 0-7`` / ``--physcpubind=0``, or a literal list of core ids on a line about cores."""
    line = view.added.get(node.lineno - 1, "") + view.added.get(node.lineno, "")  # a call split over lines
    return bool(_TASKSET.search(text) or (_ID_LIST.match(text) and _CORE_WORD.search(line)))


def _cli_flags(view: FileView) -> list[Finding]:
    out = []
    for node in view.post_nodes.of(ast.Call):
        if node.lineno in view.added and call_name(node) == "add_argument" and node.args:
            flag = node.args[0]
            if isinstance(flag, ast.Constant) and isinstance(flag.value, str) and flag.value.startswith("--"):
                evidence = [view.added[node.lineno].strip()]
                out.append(
                    make_finding("cli-flag-added", "low", view.path, node.lineno, evidence, name=flag.value)
                )
    return out


def _statement(text: str) -> ast.stmt | None:
    try:
        body = ast.parse(text.strip()).body
    except SyntaxError:
        try:
            body = ast.parse(text.strip() + "\n    pass").body  # an `if ...:` header on its own
        except SyntaxError:
            return None
    return body[0] if len(body) == 1 else None


_REQUEST_NAME = re.compile(r"^(\w+_)?request$")
CLIENT_FIELDS = frozenset({"kv_transfer_params", "extra_args", "extra_body", "vllm_xargs"})


def _request_attrs(node: ast.AST | None) -> list[str]:
    """``request.x`` (or ``raw_request.x``, ``finished_request.x``) attributes read in ``node``."""
    return [
        ast.unparse(n)
        for n in ast.walk(node)
        if node is not None
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and _REQUEST_NAME.match(n.value.id)
    ]


def _client_data(node: ast.AST) -> bool:
    """Reads a field clients fill and the server passes on (``kv_transfer_params``, ``extra_args``).
    The API request's ordinary fields (``request.max_tokens``) are the client's own settings."""
    passed_on = {  # `kv_transfer_params=req.kv_transfer_params` hands the field on; it replaces nothing
        id(x)
        for k in ast.walk(node)
        if isinstance(k, ast.keyword) and k.arg in CLIENT_FIELDS
        for x in ast.walk(k.value)
    }
    for n in ast.walk(node):
        name = n.attr if isinstance(n, ast.Attribute) else n.id if isinstance(n, ast.Name) else None
        if name in CLIENT_FIELDS and id(n) not in passed_on:
            return True
    return False


def _hunks(view: FileView) -> list[tuple[list[tuple[int, str]], list[tuple[int, str]]]]:
    """Per hunk: its removed (pre line, text) and added (post line, text) lines."""
    out = []
    for hunk in view.fp.hunks:
        old_no, new_no, removed, added = hunk.old_start, hunk.new_start, [], []
        for line in hunk.lines:
            op, text = line[:1], line[1:]
            if op == "-":
                removed.append((old_no, text))
                old_no += 1
            elif op == "+":
                added.append((new_no, text))
                new_no += 1
            elif op == " ":
                old_no, new_no = old_no + 1, new_no + 1
        out.append((removed, added))
    return out


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())


def _hunk_findings(view: FileView) -> list[Finding]:
    if not view.path.endswith(".py"):
        return []
    out = []
    for removed, added in _hunks(view):
        old_raises = [(n, m.group(1)) for n, t in removed if (m := _RAISE.match(t))]
        new_raises = [(n, m.group(1)) for n, t in added if (m := _RAISE.match(t))]
        for (_, was), (line, now) in zip(old_raises, new_raises):
            if was != now:
                evidence = [view.added[line].strip()]
                out.append(
                    make_finding(
                        "exception-type-changed", "medium", view.path, line, evidence, old=was, new=now
                    )
                )
        out += _request_flag(view, removed, added)
    return out + (_client_value(view) + _request_gates(view) if view.post is not None else [])


def _env_switches(view: FileView) -> set[str]:
    """Module constants read from the environment (``X = os.getenv("X", "0") == "1"``)."""
    names = set()
    for node in view.post.body if view.post else []:
        if isinstance(node, ast.Assign) and any(w in ast.unparse(node.value) for w in ("getenv", "environ")):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _request_flag(view: FileView, removed: list, added: list) -> list[Finding]:
    """Existing lines re-indented under a new ``if request.x:`` (no else): off unless the flag is set.
    A guard on the very value the body uses (``if r.x: observe(r.x)``) is a None check, not a flag."""
    out = []
    moved = {t.strip(): _indent(t) for _, t in removed if t.strip()}
    switches = _env_switches(view) if added else set()
    for index, (line, text) in enumerate(added):
        node = _statement(text)
        if not isinstance(node, ast.If) or isinstance(node.test, ast.UnaryOp):
            continue
        flags = _request_attrs(node.test) + [
            n.id for n in ast.walk(node.test) if isinstance(n, ast.Name) and n.id in switches
        ]
        body = []
        for _, t in added[index + 1 :]:
            if t.strip() and _indent(t) <= _indent(text):
                break
            body.append(t)
        if not flags or any(f in t for f in flags for t in body):
            continue
        if any(t.strip() in moved and _indent(t) > moved[t.strip()] for t in body):
            flag = ast.unparse(node.test)[:80]
            out.append(
                make_finding("off-unless-request-flag", "high", view.path, line, [text.strip()], flag=flag)
            )
    return out


def _unset(test: ast.AST) -> bool:
    """Holds when the client did not ask: ``not r.x``, ``r.x is None``, ``.get(k, False) is False``."""
    for n in ast.walk(test):
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            return True
        if isinstance(n, ast.Compare) and any(
            isinstance(c, ast.Constant) and c.value in (None, False) for c in n.comparators
        ):
            return True
    return False


def _early_out(node: ast.If) -> bool:
    """The body only leaves early or switches something off."""
    return not node.orelse and all(
        isinstance(s, ast.Return)
        or (
            isinstance(s, ast.Assign)
            and isinstance(s.value, ast.Constant)
            and s.value.value in (False, None, 0)
        )
        for s in node.body
    )


def _request_gates(view: FileView) -> list[Finding]:
    """A new ``if <request flag unset>: return`` (or ``feature = False``) in front of existing code:
    the behaviour is now off for every client that does not send the flag."""
    out = []
    for node in view.post_nodes.of(ast.If):
        if node.lineno in view.added and _request_attrs(node.test) and _unset(node.test) and _early_out(node):
            flag = ", ".join(dict.fromkeys(_request_attrs(node.test)))[:80]
            evidence = [view.added[node.lineno].strip()[:160]]
            out.append(
                make_finding("off-unless-request-flag", "high", view.path, node.lineno, evidence, flag=flag)
            )
    return out


def _client_value(view: FileView) -> list[Finding]:
    """An added assignment of client data (``kv_transfer_params``, the API request) to something the
    server computed: the same target assigned from server data on a removed line or elsewhere."""

    def assigns(nodes) -> list[tuple[str, ast.Assign]]:
        return [(ast.unparse(t), n) for n in nodes.of(ast.Assign) for t in n.targets]

    server = {
        target
        for target, node in assigns(view.pre_nodes) + assigns(view.post_nodes)
        if not _client_data(node.value) and (node.lineno in view.removed or node.lineno not in view.added)
    }
    out = []
    for target, node in assigns(view.post_nodes):
        if node.lineno in view.added and target in server and _client_data(node.value):
            evidence = [view.added[node.lineno].strip()[:160]]
            out.append(
                make_finding(
                    "client-value-replaces-server", "high", view.path, node.lineno, evidence, name=target
                )
            )
    return out
