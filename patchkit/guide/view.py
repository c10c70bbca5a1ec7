"""One changed file as the detectors see it: each image parsed and walked once, plus the changed lines."""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import chain

from patchkit.diff.model import FilePatch

Source = Callable[[str], "bytes | None"]


class NodeIndex:
    """Every node of one tree in ``ast.walk`` order, walked once and shared by all detectors."""

    def __init__(self, tree: ast.AST | None) -> None:
        self.nodes = _walk(tree) if tree is not None else []
        self._positions: defaultdict[type, list[int]] = defaultdict(list)
        for position, node in enumerate(self.nodes):
            self._positions[type(node)].append(position)
        self._of: dict[tuple[type, ...], list] = {}

    def of(self, *types: type) -> list:
        """The nodes that are instances of ``types``, in walk order (cached per type set)."""
        found = self._of.get(types)
        if found is None:
            groups = [p for kind, p in self._positions.items() if issubclass(kind, types)]
            positions = groups[0] if len(groups) == 1 else sorted(chain.from_iterable(groups))
            found = self._of[types] = [self.nodes[p] for p in positions]
        return found


def _walk(tree: ast.AST) -> list[ast.AST]:
    """``list(ast.walk(tree))``: the same breadth-first order, without a generator per node."""
    nodes = [tree]
    for node in nodes:  # grows while iterated: a breadth-first queue
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, ast.AST):
                nodes.append(value)
            elif isinstance(value, list):
                nodes += [item for item in value if isinstance(item, ast.AST)]
    return nodes


@dataclass
class FileView:
    """One changed file: both images parsed (None when absent or not Python) and changed lines."""

    fp: FilePatch
    pre: ast.Module | None
    post: ast.Module | None
    pre_len: int
    post_len: int
    added: dict[int, str] = field(default_factory=dict)  # post line -> text
    removed: dict[int, str] = field(default_factory=dict)  # pre line -> text
    hunk_of_removed: dict[int, int] = field(default_factory=dict)
    hunk_added: list[list[str]] = field(default_factory=list)
    pre_nodes: NodeIndex = field(default_factory=lambda: NodeIndex(None))
    post_nodes: NodeIndex = field(default_factory=lambda: NodeIndex(None))

    @property
    def path(self) -> str:
        return self.fp.path


class Images:
    """Each distinct source parsed and walked once per review; detectors only read the trees."""

    def __init__(self) -> None:
        self._seen: dict[bytes, tuple[ast.Module | None, NodeIndex]] = {}

    def __call__(self, data: bytes | None) -> tuple[ast.Module | None, NodeIndex]:
        if data is None:
            return None, NodeIndex(None)
        if data not in self._seen:
            tree = _parse(data)
            self._seen[data] = (tree, NodeIndex(tree))
        return self._seen[data]


def file_view(fp: FilePatch, pre: Source, post: Source, images: Images | None = None) -> FileView:
    images = images or Images()
    old = pre(fp.old_path) if fp.old_path else None
    new = post(fp.new_path) if fp.new_path else None
    is_py = fp.path.endswith((".py", ".pyi"))
    old_tree, old_nodes = images(old) if is_py else (None, NodeIndex(None))
    new_tree, new_nodes = images(new) if is_py else (None, NodeIndex(None))
    view = FileView(
        fp,
        old_tree,
        new_tree,
        _count_lines(old),
        _count_lines(new),
        pre_nodes=old_nodes,
        post_nodes=new_nodes,
    )
    for index, hunk in enumerate(fp.hunks):
        old_no, new_no, added = hunk.old_start, hunk.new_start, []
        for line in hunk.lines:
            op, text = line[:1], line[1:]
            if op == "-":
                view.removed[old_no] = text
                view.hunk_of_removed[old_no] = index
                old_no += 1
            elif op == "+":
                view.added[new_no] = text
                added.append(text)
                new_no += 1
            elif op == " ":
                old_no, new_no = old_no + 1, new_no + 1
        view.hunk_added.append(added)
    return view


def _parse(data: bytes | None) -> ast.Module | None:
    if data is None:
        return None
    try:
        return ast.parse(data.decode("utf-8", errors="replace"))
    except (SyntaxError, ValueError):
        return None


def _count_lines(data: bytes | None) -> int:
    return 0 if data is None else data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
