"""``patchkit runtime`` judged by Python itself: for each shape, two small fake vLLM pins of ours
("0.1" the plugin was written for, "0.2" the bump), a plugin module of ours, the verdict — and then
the fake 0.2 imported for real with the plugin applied and called the way vLLM calls it, so the
interpreter shows what the verdict claims (an import that fails, a patch that never runs, a call
that binds wrong)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchkit.audit.model import AuditResult
from patchkit.report.words import fill_words
from patchkit.runtime.engine import RuntimeOptions, run_runtime
from patchkit.values import Pin

PACKAGE = "myplug/patch"


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _runtime(
    tmp_path: Path,
    old: dict[str, str] | None,
    new: dict[str, str],
    plugin: dict[str, str],
    python: str | None = None,
) -> AuditResult:
    """Both pins and the plugin written under ``tmp_path``; the runtime record of 0.2 (since 0.1)."""
    new_tree = _write(tmp_path / "new", new)
    old_tree = _write(tmp_path / "old", old) if old is not None else None
    files = {"myplug/__init__.py": "", f"{PACKAGE}/__init__.py": "", **plugin}
    _write(tmp_path / "plugin", files)
    options = RuntimeOptions(
        Pin(source="path", path=str(new_tree), version="0.2"),
        new_tree,
        Pin(source="path", path=str(old_tree), version="0.1") if old_tree else None,
        old_tree,
        python,
        timeout=120,
    )
    return fill_words(run_runtime(tmp_path / "plugin" / PACKAGE, options))


def _real(tmp_path: Path, code: str, *extra: Path) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter whose vllm is the fake 0.2 and whose plugin is ours."""
    path = os.pathsep.join(str(p) for p in (tmp_path / "new", tmp_path / "plugin", *extra))
    env = {**os.environ, "PYTHONPATH": path}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)


def _target(result: AuditResult, name: str):
    return next(t for pa in result.patches for t in pa.targets if t.target == name)


def _gates(result: AuditResult) -> dict[str, str]:
    (row,) = result.patches
    return {g.gate: g.status for g in row.gates}


# --------------------------------------------------------------------------- (a) gone, not added

LAZY = (  # a __getattr__ reading cannot follow: which names it answers is known only by running it
    'LAZY = {"fused_norm": "vllm._fused"}\n\n\n'
    "def __getattr__(name):\n"
    "    import importlib\n\n"
    "    module = LAZY.get(name)\n"
    "    if module is None:\n"
    "        raise AttributeError(name)\n"
    "    return getattr(importlib.import_module(module), name)\n"
)
OPS_OLD = LAZY + "\n\ndef rms_norm(x):\n    return x\n\n\ndef forward(x):\n    return rms_norm(x)\n"
OPS_NEW = LAZY + "\n\ndef forward(x):\n    from vllm._fused import fused_norm\n\n    return fused_norm(x)\n"
FUSED = "def fused_norm(x):\n    return x\n"


def test_a_target_the_bump_deleted_is_missing_with_where_it_was_even_when_the_interpreter_settles_it(
    tmp_path, monkeypatch
):
    old = {"vllm/__init__.py": "", "vllm/ops.py": OPS_OLD, "vllm/_fused.py": FUSED}
    new = {"vllm/__init__.py": "", "vllm/ops.py": OPS_NEW, "vllm/_fused.py": FUSED}
    plugin = {
        f"{PACKAGE}/patch_norm.py": "import vllm.ops\n\n\ndef rms_norm(x):\n    return x * 2\n\n\n"
        "vllm.ops.rms_norm = rms_norm\nvllm.ops.npu_only = rms_norm\n"
    }
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "new"))  # the interpreter's vllm is the fake 0.2
    result = _runtime(tmp_path, old, new, plugin, python=sys.executable)
    norm = _target(result, "vllm.ops.rms_norm")
    assert (norm.status, norm.old_defined_in) == ("missing", "vllm/ops.py:13")
    assert norm.real["exists"] is False
    added = _target(result, "vllm.ops.npu_only")  # in neither pin: the plugin's own attribute
    assert added.status == "added" and not added.old_defined_in
    gates = _gates(result)
    assert (gates["targets"], gates["upstream"]) == ("failed", "failed") and result.verdict != "ready"
    # Python: vLLM 0.2 has no rms_norm, and its forward never reaches the plugin's replacement.
    seen = _real(
        tmp_path,
        "import vllm.ops\nprint(hasattr(vllm.ops, 'rms_norm'))\n"
        "import myplug.patch.patch_norm\nprint(vllm.ops.forward(3))\n",
    )
    assert seen.stdout.split() == ["False", "3"], seen.stderr


# --------------------------------------------------------------------------- (b) submodules


VLLM_INIT = (
    'MODULE_ATTRS = {"LLM": ".entrypoints:LLM"}\n\n\n'
    "def __getattr__(name):\n"
    "    if name in MODULE_ATTRS:\n"
    "        raise NotImplementedError(name)\n"
    "    raise AttributeError(f'module vllm has no attribute {name!r}')\n"
)


def test_a_deleted_subpackage_is_missing_though_the_package_defines_getattr(tmp_path):
    old = {
        "vllm/__init__.py": VLLM_INIT,
        "vllm/legacy/__init__.py": "",
        "vllm/legacy/worker.py": "def step(batch):\n    return len(batch)\n",
        "vllm/engine.py": "from vllm.legacy.worker import step\n\n\n"
        "def run(batch):\n    return step(batch)\n",
    }
    new = {"vllm/__init__.py": VLLM_INIT, "vllm/engine.py": "def run(batch):\n    return sum(batch)\n"}
    plugin = {
        f"{PACKAGE}/patch_legacy.py": "import vllm.legacy.worker\n"
        "from vllm.legacy import worker as legacy\n\n\n"
        "def step(batch):\n    return 0\n\n\nvllm.legacy.worker.step = step\nlegacy.LIMIT = 4\n"
    }
    result = _runtime(tmp_path, old, new, plugin)
    step = _target(result, "vllm.legacy.worker.step")
    assert (step.status, step.old_defined_in) == ("missing", "vllm/legacy/worker.py:1")
    assert "vllm.legacy" in step.reason["en"]  # the module the import system cannot find
    limit = _target(result, "vllm.legacy.worker.LIMIT")
    assert limit.status in ("missing", "added") and limit.status != "unknown"
    gates = _gates(result)
    assert gates["targets"] == "failed" and gates["upstream"] == "failed" and gates["uses"] == "failed"
    (row,) = result.patches
    uses = {u["name"]: u["status"] for u in row.gates[-1].details["uses"]}
    assert uses["vllm.legacy.worker"] == "absent"
    # Python: importing the plugin module fails, whatever vllm.__getattr__ would answer.
    seen = _real(tmp_path, "import myplug.patch.patch_legacy\n")
    assert seen.returncode != 0 and "No module named 'vllm.legacy'" in seen.stderr


def test_a_name_a_lazy_table_does_not_list_is_absent(tmp_path):
    old = {
        "vllm/__init__.py": VLLM_INIT,
        "vllm/legacy/__init__.py": "from vllm.legacy import worker\n",
        "vllm/legacy/worker.py": "def step(batch):\n    return len(batch)\n",
    }
    new = {"vllm/__init__.py": VLLM_INIT}
    plugin = {f"{PACKAGE}/patch_attr.py": "import vllm\n\n\ndef step(batch):\n    return 0\n\n\n"
              "vllm.legacy.worker.step = step\nvllm.LLM.extra = step\n"}  # fmt: skip
    result = _runtime(tmp_path, old, new, plugin)
    step = _target(result, "vllm.legacy.worker.step")
    assert (step.status, step.old_defined_in) == ("missing", "vllm/legacy/worker.py:1")
    assert "AttributeError" in step.reason["en"]
    assert _target(result, "vllm.LLM.extra").status == "unknown"  # a name the table lists: made at run time
    # Python: the package's __getattr__ raises for it.
    seen = _real(tmp_path, "import vllm\nvllm.legacy\n")
    assert "AttributeError: module vllm has no attribute 'legacy'" in seen.stderr


def test_a_compiled_module_the_build_makes_is_not_settled_never_absent(tmp_path):
    import _json
    import shutil

    setup = 'from setuptools import Extension, setup\n\nsetup(ext_modules=[Extension("vllm._json", [])])\n'
    new = {"setup.py": setup, "vllm/__init__.py": VLLM_INIT}
    plugin = {f"{PACKAGE}/patch_ops.py": "import vllm._json\n\n\ndef scan(*args):\n    return None\n\n\n"
              "vllm._json.scanstring = scan\n"}  # fmt: skip
    result = _runtime(tmp_path, None, new, plugin)
    scan = _target(result, "vllm._json.scanstring")
    assert scan.status == "unknown" and "vllm._json" in scan.reason["en"]
    (row,) = result.patches
    assert {u["name"]: u["status"] for u in row.gates[-1].details["uses"]}["vllm._json"] == "unknown"
    result = _runtime(tmp_path, None, new | {"setup.py": ""}, plugin)  # undeclared: nothing builds it
    (row,) = result.patches
    assert {u["name"]: u["status"] for u in row.gates[-1].details["uses"]}["vllm._json"] == "absent"
    # Python: a build puts the compiled module into the package, where the import system finds it.
    shutil.copy(_json.__file__, tmp_path / "new" / "vllm" / Path(_json.__file__).name)
    seen = _real(tmp_path, "import myplug.patch.patch_ops\nimport vllm._json as m\nprint(m.scanstring(1))\n")
    assert seen.stdout.split() == ["None"], seen.stderr


@pytest.mark.parametrize(
    "body, answered",
    [
        (
            "def __getattr__(name):\n    if name in T:\n        return T[name]\n"
            "    raise AttributeError(name)",
            {"a", "b"},
        ),
        (
            "def __getattr__(name):\n    if name == 'p':\n        return 1\n    elif name in globals():\n"
            "        return globals()[name]\n    else:\n        raise AttributeError(name)",
            {"p"},
        ),
        (
            "def __getattr__(name):\n    if name not in globals():\n        raise AttributeError(name)\n"
            "    return globals()[name]",
            set(),
        ),
        ("def __getattr__(name):\n    return T.get(name)", None),
        ("def __getattr__(name):\n    if name in T:\n        return 1", None),
        ("def __getattr__(name):\n    if name in U:\n        return 1\n    raise AttributeError(name)", None),
    ],
)
def test_which_names_a_module_getattr_answers(body, answered):
    import ast

    from patchkit.runtime.lazy import answers

    module = ast.parse("T = {'a': 1, 'b': 2}\nU = ['x']\nU.append('y')\n" + body).body
    found = answers(module[-1], module)
    assert (set(found) if found is not None else None) == answered
    namespace: dict = {}
    exec(compile(ast.Module(module, []), "m", "exec"), namespace)  # Python agrees on the names it lists
    for name in answered or ():
        if name != "p":
            assert namespace["__getattr__"](name) is not None
    if answered is not None:
        with pytest.raises(AttributeError):
            namespace["__getattr__"]("zz")


# --------------------------------------------------------------------------- (c) data-model names


LAYERS = (
    "import functools\n\n\n"
    "def traced(fn):\n"
    "    @functools.wraps(fn)\n"
    "    def inner(*args, **kwargs):\n"
    "        return fn(*args, **kwargs)\n\n"
    "    return inner\n\n\n"
    "class Linear:\n"
    "    def forward(self, x):\n"
    "        return x\n\n\n"
    "@traced\n"
    "def rope(x):\n"
    "    return x\n\n\n"
    "def plain(x):\n"
    "    return x\n"
)


def test_what_every_class_and_function_has_is_known(tmp_path):
    new = {"vllm/__init__.py": "", "vllm/layers.py": LAYERS}
    plugin = {
        f"{PACKAGE}/patch_names.py": "from vllm.layers import Linear, plain, rope\n\n\n"
        "def forward(self, x):\n    return x\n\n\n"
        "Linear.forward = forward\n"
        "NAMES = (Linear.__qualname__, Linear.__module__, Linear.__name__, Linear.__dict__, Linear.__mro__,\n"
        "         Linear.__doc__, Linear.forward.__qualname__, plain.__qualname__, plain.__module__,\n"
        "         plain.__code__, plain.__defaults__, rope.__wrapped__, rope.__name__)\n"
    }
    result = _runtime(tmp_path, None, new, plugin)
    (row,) = result.patches
    uses = {u["name"].removeprefix("vllm.layers."): u["status"] for u in row.gates[-1].details["uses"]}
    for name in ("Linear.__qualname__", "Linear.__module__", "Linear.__name__", "Linear.__dict__",
                 "Linear.__mro__", "Linear.__doc__", "Linear.forward.__qualname__", "plain.__qualname__",
                 "plain.__module__", "plain.__code__", "plain.__defaults__", "rope.__wrapped__",
                 "rope.__name__"):  # fmt: skip
        assert uses[name] == "ok", (name, uses)
    assert _gates(result)["uses"] == "passed" and result.verdict == "ready"
    # Python: every one of them is there (the module body reads them all at import).
    seen = _real(tmp_path, "import myplug.patch.patch_names as m\nprint(len(m.NAMES))\n")
    assert seen.stdout.split() == ["13"], seen.stderr


def test_wrapped_is_known_only_where_functools_wraps_made_it(tmp_path):
    from patchkit.runtime.resolve import Definition, SourceIndex

    index = SourceIndex(_write(tmp_path, {"vllm/__init__.py": "", "vllm/layers.py": LAYERS}))
    assert isinstance(index.resolve("vllm.layers.rope.__wrapped__"), Definition)
    assert not isinstance(index.resolve("vllm.layers.plain.__wrapped__"), Definition)
    seen = subprocess.run(
        [sys.executable, "-c", "import vllm.layers as m\nprint(hasattr(m.rope, '__wrapped__'), "
         "hasattr(m.plain, '__wrapped__'))"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tmp_path)}, timeout=60,
    )  # fmt: skip
    assert seen.stdout.split() == ["True", "False"], seen.stderr


# --------------------------------------------------------------------------- (d) descriptor kinds


WORKER_OLD = (
    "class Worker:\n"
    "    @staticmethod\n"
    "    def pad(n, size):\n"
    "        return n + (-n % size)\n\n"
    "    def size(self):\n"
    "        return 8\n\n"
    "    def run(self, n):\n"
    "        return self.pad(n, self.size())\n"
)
WORKER_NEW = WORKER_OLD.replace("    def size", "    @property\n    def size").replace("size())", "size)")


def test_a_descriptor_kind_is_part_of_the_signature(tmp_path):
    old = {"vllm/__init__.py": "", "vllm/worker.py": WORKER_OLD}
    new = {"vllm/__init__.py": "", "vllm/worker.py": WORKER_NEW}
    plugin = {
        f"{PACKAGE}/patch_worker.py": "from vllm.worker import Worker\n\n\n"
        "def pad(n, size):\n    return n + (-n % size) * 2\n\n\n"
        "def size(self):\n    return 4\n\n\n"
        "Worker.pad = pad\nWorker.size = size\n"
    }
    result = _runtime(tmp_path, old, new, plugin)
    pad, size = _target(result, "vllm.worker.Worker.pad"), _target(result, "vllm.worker.Worker.size")
    assert pad.status == "unchanged" and pad.signature == "@staticmethod (n, size)"
    assert pad.replacement_signature == "(n, size)" and len(pad.signature_problems) == 1
    assert "staticmethod" in pad.signature_problems[0]["en"]
    assert size.status == "signature-changed"  # a method became a property upstream
    assert size.old_signature == "(self)" and size.signature == "@property (self)"
    assert "property" in size.signature_problems[0]["en"]
    assert _gates(result)["signature"] == "failed"
    # Python: vLLM calls pad on an instance, so the instance lands in `n`; size is read, not called.
    seen = _real(
        tmp_path, "import myplug.patch.patch_worker\nfrom vllm.worker import Worker\nWorker().run(5)\n"
    )
    assert "pad() takes 2 positional arguments but 3 were given" in seen.stderr
    seen = _real(
        tmp_path, "import myplug.patch.patch_worker\nfrom vllm.worker import Worker\nWorker().size + 1\n"
    )
    assert "unsupported operand type(s) for +: 'method' and 'int'" in seen.stderr


def test_the_real_import_compares_the_descriptor_too(tmp_path, monkeypatch):
    plugin = {f"{PACKAGE}/patch_worker.py": "from vllm.worker import Worker\n\n\n"
              "def size(self):\n    return 4\n\n\nWorker.size = property(size)\n"}  # fmt: skip
    old = {"vllm/__init__.py": "", "vllm/worker.py": WORKER_OLD}
    new = {"vllm/__init__.py": "", "vllm/worker.py": WORKER_NEW}
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "new"))
    size = _target(_runtime(tmp_path, old, new, plugin, python=sys.executable), "vllm.worker.Worker.size")
    assert size.real["agrees"] is True and "signature" in size.real["compared"]
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "old"))  # the interpreter's size is a plain method
    size = _target(_runtime(tmp_path, old, new, plugin, python=sys.executable), "vllm.worker.Worker.size")
    assert size.real["agrees"] is False  # same parameters (self), another descriptor
    assert [d["en"] for d in size.real["differences"]][0].startswith("signature")


def test_a_replacement_of_the_same_descriptor_kind_passes(tmp_path):
    new = {"vllm/__init__.py": "", "vllm/worker.py": WORKER_NEW}
    plugin = {
        f"{PACKAGE}/patch_worker.py": "from vllm.worker import Worker\n\n\n"
        "def pad(n, size):\n    return n + (-n % size) * 2\n\n\n"
        "def size(self):\n    return 4\n\n\n"
        "Worker.pad = staticmethod(pad)\nWorker.size = property(size)\n"
    }
    result = _runtime(tmp_path, None, new, plugin)
    assert _gates(result)["signature"] == "passed"
    seen = _real(
        tmp_path, "import myplug.patch.patch_worker\nfrom vllm.worker import Worker\nprint(Worker().run(5))"
    )
    assert seen.stdout.split() == ["11"], seen.stderr  # 5 + (-5 % 4) * 2


ENGINE = (
    "class Engine:\n    @staticmethod\n    def run_core(rank):\n        return rank\n\n\n"
    "def launch():\n    return Engine.run_core(3)\n"
)
ON_INSTANCE = "\n\ndef launch_on(engine):\n    return engine.run_core(3)\n"


def test_a_staticmethod_vllm_reads_only_through_its_class_binds_as_a_plain_function(tmp_path):
    plugin = {
        f"{PACKAGE}/patch_engine.py": "from vllm.engine import Engine\n\n\n"
        "def run_core(rank):\n    return rank * 2\n\n\nEngine.run_core = run_core\n"
    }
    result = _runtime(tmp_path, None, {"vllm/__init__.py": "", "vllm/engine.py": ENGINE}, plugin)
    assert _gates(result)["signature"] == "passed"  # vLLM reads Engine.run_core, never engine.run_core
    seen = _real(tmp_path, "import myplug.patch.patch_engine\nimport vllm.engine as m\nprint(m.launch())\n")
    assert seen.stdout.split() == ["6"], seen.stderr
    # The same pin with one read through an instance: Python binds the plain function to it.
    result = _runtime(
        tmp_path, None, {"vllm/__init__.py": "", "vllm/engine.py": ENGINE + ON_INSTANCE}, plugin
    )
    assert _gates(result)["signature"] == "failed"
    seen = _real(
        tmp_path, "import myplug.patch.patch_engine\nimport vllm.engine as m\nm.launch_on(m.Engine())\n"
    )
    assert "run_core() takes 1 positional argument but 2 were given" in seen.stderr


# --------------------------------------------------------------------------- (e) bases outside vLLM


EXTLIB = (
    "class Module:\n"
    "    def __call__(self, *args):\n"
    "        return self.forward(*args)\n\n"
    "    def extra_repr(self):\n"
    "        return ''\n"
)
NORM_OLD = (
    "from extlib import Module\n\n\n"
    "class RMSNorm(Module):\n"
    "    def forward(self, x):\n"
    "        return self.forward_native(x)\n\n"
    "    def forward_native(self, x):\n"
    "        return x\n\n"
    "    def extra_repr(self):\n"
    "        return 'eps=1e-6'\n"
)
NORM_NEW = (
    "from extlib import Module\n\n\n"
    "class RMSNorm(Module):\n"
    "    def forward(self, x):\n"
    "        return self.forward_static(x)\n\n"
    "    @staticmethod\n"
    "    def forward_static(x):\n"
    "        return x\n"
)


def test_a_method_gone_from_a_class_is_missing_whatever_its_bases(tmp_path, monkeypatch):
    ext = _write(tmp_path / "ext", {"extlib/__init__.py": EXTLIB})  # a base outside the vLLM tree
    old = {"vllm/__init__.py": "", "vllm/norm.py": NORM_OLD}
    new = {"vllm/__init__.py": "", "vllm/norm.py": NORM_NEW}
    plugin = {
        f"{PACKAGE}/patch_norm.py": "from vllm.norm import RMSNorm\n\n\n"
        "def forward_native(self, x):\n    return x * 2\n\n\n"
        "def extra_repr(self):\n    return 'ours'\n\n\n"
        "RMSNorm.forward_native = forward_native\nRMSNorm.extra_repr = extra_repr\n"
    }
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path / "new"), str(ext)]))
    result = _runtime(tmp_path, old, new, plugin, python=sys.executable)
    native, extra = (
        _target(result, "vllm.norm.RMSNorm.forward_native"),
        _target(result, "vllm.norm.RMSNorm.extra_repr"),
    )
    assert (native.status, native.old_defined_in) == ("missing", "vllm/norm.py:8")
    assert (extra.status, extra.old_defined_in) == ("missing", "vllm/norm.py:11")
    assert native.real["agrees"] is True and extra.real["agrees"] is True, (native.real, extra.real)
    gates = _gates(result)
    assert (gates["targets"], gates["upstream"], gates["witness"]) == ("failed", "failed", "passed")
    # Python: the class no longer has its own; forward never reaches the replacement; extra_repr is extlib's.
    seen = _real(
        tmp_path,
        "from vllm.norm import RMSNorm\n"
        "print('forward_native' in vars(RMSNorm), RMSNorm.extra_repr.__module__)\n"
        "import myplug.patch.patch_norm\nprint(RMSNorm()(3))\n",
        ext,
    )
    assert seen.stdout.split() == ["False", "extlib", "3"], seen.stderr


def test_a_class_whose_module_is_gone_is_looked_for_by_the_class_not_by_the_module_name(tmp_path):
    old = {
        "vllm/__init__.py": "",
        "vllm/attention/__init__.py": "",
        "vllm/attention/layer.py": "class Attention:\n    def forward(self, q):\n        return q\n",
    }
    new = {
        "vllm/__init__.py": "",
        "vllm/layers/__init__.py": "",
        "vllm/layers/attention.py": "class Attention:\n    def forward(self, q):\n        return q\n",
        "vllm/models/__init__.py": "",
        "vllm/models/vit.py": "class Block:\n    def attention(self, q):\n        return q\n",
    }
    plugin = {f"{PACKAGE}/patch_attn.py": "import vllm\n\n\ndef forward(self, q):\n    return q\n\n\n"
              "vllm.attention.layer.Attention.forward = forward\n"}  # fmt: skip
    result = _runtime(tmp_path, old, new, plugin)
    forward = _target(result, "vllm.attention.layer.Attention.forward")
    assert forward.status == "missing"
    assert forward.moved_to == ["vllm.layers.attention.Attention.forward (vllm/layers/attention.py:1)"]
    seen = _real(tmp_path, "from vllm.layers.attention import Attention\nprint(Attention().forward(2))\n")
    assert seen.stdout.split() == ["2"], seen.stderr


def test_a_method_a_factory_made_base_of_vllm_may_carry_is_not_called_missing(tmp_path, monkeypatch):
    adapters = (
        "class Adapter:\n    def parse(self, text):\n        return text.split()\n\n\n"
        "def make_adapter(name):\n    return type(name, (Adapter,), {})\n\n\n"
        "MinimaxAdapter = make_adapter('MinimaxAdapter')\n"
    )
    old = {
        "vllm/__init__.py": "",
        "vllm/parser.py": "class Minimax:\n    def parse(self, text):\n        return [text]\n",
    }
    new = {
        "vllm/__init__.py": "",
        "vllm/adapters.py": adapters,
        "vllm/parser.py": "from vllm.adapters import MinimaxAdapter\n\n\n"
        "class Minimax(MinimaxAdapter):\n    pass\n",
    }
    plugin = {f"{PACKAGE}/patch_parser.py": "from vllm.parser import Minimax\n\n\ndef parse(self, text):\n"
              "    return []\n\n\nMinimax.parse = parse\n"}  # fmt: skip
    parse = _target(_runtime(tmp_path, old, new, plugin), "vllm.parser.Minimax.parse")
    assert (
        parse.status == "unknown" and "MinimaxAdapter" in parse.reason["en"]
    )  # vLLM's own base may carry it
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "new"))
    parse = _target(_runtime(tmp_path, old, new, plugin, python=sys.executable), "vllm.parser.Minimax.parse")
    assert (parse.status, parse.real["file"]) == ("present", "vllm/adapters.py")  # the interpreter settles it
    seen = _real(tmp_path, "from vllm.parser import Minimax\nprint(Minimax().parse('a b'))\n")
    assert seen.stdout.split() == ["['a',", "'b']"], seen.stderr


# --------------------------------------------------------------------------- (f) registry formats


REGISTRY = (
    "# * Worker Patch:\n# ===============\n"
    "# ** File: patch_cache.py**\n# ~~~~~~~~~~~~~~~~~~~~~~~~\n"
    "#   1. `vllm.cache.allocate_aligned`\n#    Why:\n#       alignment on our device.\n"
    "#    How：\n#       replace it.\n#\n"
    "# ** 2. File: patch_other.py **\n# ~~~~~~~~~~~~~~~~~~~~~~~~\n"
    "#   1. `vllm.cache.allocate`\n#    Why:\n#       logging.\n"
)


def test_both_registry_formats_are_read(tmp_path):
    new = {"vllm/__init__.py": "", "vllm/cache.py": "def allocate(n):\n    return [0] * n\n"}
    plugin = {
        f"{PACKAGE}/__init__.py": REGISTRY,
        f"{PACKAGE}/patch_cache.py": "import vllm.cache\n\n\ndef allocate_aligned(n, align):\n"
        "    return [0] * (n + (-n % align))\n\n\nvllm.cache.allocate_aligned = allocate_aligned\n",
        f"{PACKAGE}/patch_other.py": "import vllm.cache\n\n\ndef allocate(n):\n    return [1] * n\n\n\n"
        "vllm.cache.allocate = allocate\n",
    }
    result = _runtime(tmp_path, None, new, plugin)
    aligned = _target(result, "vllm.cache.allocate_aligned")
    assert [item["why"] for item in aligned.registry] == ["alignment on our device."]  # the older format
    assert aligned.status == "missing"  # the plugin's notes say vLLM had it; the pin does not
    other = _target(result, "vllm.cache.allocate")
    assert [item["why"] for item in other.registry] == ["logging."]  # the numbered format
    rows = {pa.patch: pa for pa in result.patches}
    assert rows["patch_cache.py"].registry["registry"] == "__init__.py"
    # Python: the pinned vLLM has no allocate_aligned for the plugin to replace.
    seen = _real(tmp_path, "import vllm.cache\nprint(hasattr(vllm.cache, 'allocate_aligned'))\n")
    assert seen.stdout.split() == ["False"], seen.stderr


# --------------------------------------------------------------------------- (g) return annotations


SAMPLER_OLD = "def compute(x) -> int:\n    return x\n\n\ndef sample(x):\n    return compute(x) + 1\n"
SAMPLER_NEW = (
    "def compute(x) -> tuple[int, int]:\n    return x, x\n\n\n"
    "def sample(x):\n    value, _ = compute(x)\n    return value + 1\n"
)


def test_a_changed_return_annotation_is_a_signature_change(tmp_path):
    old = {"vllm/__init__.py": "", "vllm/sampler.py": SAMPLER_OLD}
    new = {"vllm/__init__.py": "", "vllm/sampler.py": SAMPLER_NEW}
    plugin = {
        f"{PACKAGE}/patch_sampler.py": "import vllm.sampler\n\n\ndef compute(x):\n    return x * 2\n\n\n"
        "vllm.sampler.compute = compute\n"
    }
    result = _runtime(tmp_path, old, new, plugin)
    compute = _target(result, "vllm.sampler.compute")
    assert compute.status == "signature-changed"
    assert (compute.old_signature, compute.signature) == ("(x) -> int", "(x) -> tuple[int, int]")
    assert any("tuple[int, int]" in p["en"] for p in compute.signature_problems)
    assert _gates(result)["signature"] == "failed"
    # Python: vLLM 0.2 unpacks what the replacement returns.
    seen = _real(tmp_path, "import myplug.patch.patch_sampler\nimport vllm.sampler\nvllm.sampler.sample(3)\n")
    assert "cannot unpack non-iterable int object" in seen.stderr


def test_a_replacement_declaring_another_return_type_fails_the_signature_gate(tmp_path):
    new = {"vllm/__init__.py": "", "vllm/sampler.py": SAMPLER_NEW}
    plugin = {
        f"{PACKAGE}/patch_sampler.py": "import vllm.sampler\n\n\n"
        "def compute(x) -> int:\n    return x * 2\n\n\ndef sample(x) -> int:\n    return x\n\n\n"
        "vllm.sampler.compute = compute\nvllm.sampler.sample = sample\n"
    }
    result = _runtime(tmp_path, None, new, plugin)
    assert _target(result, "vllm.sampler.compute").signature_problems
    assert not _target(result, "vllm.sampler.sample").signature_problems  # the original declares none
    assert _gates(result)["signature"] == "failed"


def test_the_same_type_spelled_another_way_is_not_a_signature_change():
    import ast

    from patchkit.runtime.annotations import annotation_key

    def key(text: str) -> str | None:
        return annotation_key(ast.parse(text, mode="eval").body)

    assert key("Optional[List[int]]") == key("list[int] | None") == key("'typing.Union[None, List[int]]'")
    assert key("Union[int, str]") == key("str | int")
    assert key("tuple[int, int]") != key("int")
