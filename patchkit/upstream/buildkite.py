"""``.buildkite/test_areas/*.yaml`` and ``.buildkite/test-pipeline.yaml`` → vLLM's CI test steps.

A step says which source paths trigger it (``source_file_dependencies``: path prefixes, ``!`` to
exclude), the pytest targets its ``commands`` run, and the ``device`` it needs. Variants across
releases: ``device`` (test_areas), older ``gpu:``/``agent_pool:``/``no_gpu: true``; ``working_dir``
decides what the pytest paths are relative to (default ``/vllm-workspace/tests``); a file may be a
plain list of steps, or hold them under ``steps:`` (also nested in groups). A step's ``mirror``
variants (other hardware) are not separate steps here.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

import yaml

from patchkit.errors import UserError
from patchkit.upstream import yamltext

DEFAULT_WORKDIR = "/vllm-workspace/tests"
# pytest options that take a separate value: their value is not a test path
_VALUE_OPTIONS = {"-m", "-k", "-n", "-c", "-p", "-o", "-x", "--ignore", "--deselect", "--junitxml",
                  "--timeout", "--maxfail", "--durations", "--rootdir", "--shard-id", "--num-shards",
                  "--dist", "--tb", "-W", "--log-level", "--confcutdir", "--ignore-glob", "--count",
                  "--forked", "--basetemp", "--reruns"}  # fmt: skip
_VALUE_OPTIONS.discard("-x")  # -x takes none; listed above only to keep the set readable


@dataclass
class CiStep:
    label: str
    key: str
    file: str  # e.g. ".buildkite/test_areas/spec_decode.yaml"
    device: str  # "h100", "cpu-small", ...; "gpu" when the step names none
    sources: list[str] = field(default_factory=list)  # source_file_dependencies, as prefixes
    excluded: list[str] = field(default_factory=list)  # the "!prefix" entries
    targets: list[str] = field(default_factory=list)  # pytest targets, repo-rooted ("tests/v1/core")
    optional: bool = False

    @property
    def on_cpu(self) -> bool:
        return self.device.startswith("cpu")

    def covers(self, path: str) -> bool:
        """Would upstream CI run this step for a change to ``path``?"""
        if any(path.startswith(p) for p in self.excluded):
            return False
        return any(path == p.rstrip("/") or path.startswith(p if p.endswith("/") else p + "/")
                   or (not p.endswith("/") and path.startswith(p)) for p in self.sources)  # fmt: skip

    def covering(self, path: str) -> str | None:
        """The longest dependency that makes this step cover ``path``."""
        if not self.covers(path):
            return None
        return max((p for p in self.sources if path.startswith(p.rstrip("/"))), key=len, default=None)


def _device(step: dict) -> str:
    for key in ("device", "gpu", "agent_pool"):
        value = step.get(key)
        if isinstance(value, str) and value:
            return value
    if step.get("no_gpu") is True:
        return "cpu"
    agents = step.get("agents")
    if isinstance(agents, dict) and isinstance(agents.get("queue"), str):
        return agents["queue"]
    return "gpu"


def _root_of(workdir: object) -> str:
    """'/vllm-workspace/tests' → 'tests/'; '/vllm-workspace' → ''; anything else outside → None."""
    text = str(workdir or DEFAULT_WORKDIR).strip().strip('"').rstrip("/")
    head = "/vllm-workspace"
    if text == head:
        return ""
    if text.startswith(head + "/"):
        return text[len(head) + 1 :] + "/"
    return "tests/"


def pytest_targets(command: str, root: str) -> list[str]:
    """Repo-rooted test paths a shell command passes to pytest (``tests/x.py::T::t`` kept whole)."""
    targets: list[str] = []
    for part in re.split(r"&&|\|\||;|\n", command):
        try:
            words = shlex.split(part, comments=True)
        except ValueError:
            words = part.split()
        at = next((i for i, w in enumerate(words) if w == "pytest" or w.endswith("/pytest")), None)
        if at is None and "-m" in words and "pytest" in words:  # python -m pytest
            at = words.index("pytest")
        if at is None:
            continue
        skip = False
        for word in words[at + 1 :]:
            if skip:
                skip = False
                continue
            if word.startswith("-"):
                skip = word in _VALUE_OPTIONS
                continue
            if "$" in word or "=" in word or word.startswith(("|", ">")):
                continue
            path = re.sub(r"^\./", "", word)
            targets.append(path if path.startswith("tests/") else root + path)
    return [t for t in targets if t.startswith("tests/")]


def _steps(data: object) -> list[dict]:
    if isinstance(data, list):
        items = data
    elif isinstance(data, dict):
        items = data.get("steps", [])
    else:
        return []
    out: list[dict] = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and "steps" in item and "commands" not in item:
            out += _steps(item)  # a group
        elif isinstance(item, dict):
            out.append(item)
    return out


def parse_pipeline(text: str, name: str) -> list[CiStep]:
    try:
        data = yamltext.safe_load(text)
    except yaml.YAMLError as exc:
        raise UserError(f"invalid YAML: {str(exc).splitlines()[0]}", name) from exc
    steps = []
    for raw in _steps(data):
        commands = raw.get("commands") or raw.get("command") or []
        commands = [commands] if isinstance(commands, str) else commands
        deps = raw.get("source_file_dependencies") or []
        deps = [str(d) for d in deps if isinstance(d, (str, int))] if isinstance(deps, list) else []
        root = _root_of(raw.get("working_dir"))
        targets: list[str] = []
        for command in commands if isinstance(commands, list) else []:
            if isinstance(command, str):
                targets += [t for t in pytest_targets(command, root) if t not in targets]
        label = str(raw.get("label") or raw.get("name") or raw.get("key") or "")
        steps.append(CiStep(
            label=label, key=str(raw.get("key") or ""), file=name, device=_device(raw),
            sources=[d for d in deps if not d.startswith("!")],
            excluded=[d[1:] for d in deps if d.startswith("!")],
            targets=targets, optional=bool(raw.get("optional", False)),
        ))  # fmt: skip
    return steps
