"""review_guide: one positive and one negative case per finding kind, on hand-written sources."""

from __future__ import annotations

import difflib

import pytest

from patchkit.diff.filediff import parse_diff
from patchkit.diff.model import Commit, FilePatch
from patchkit.guide import review_guide
from patchkit.report.words import in_all_languages


def file_patch(path: str, old: str | None, new: str | None) -> FilePatch:
    a = (old or "").splitlines(keepends=True)
    b = (new or "").splitlines(keepends=True)
    lines = list(
        difflib.unified_diff(
            a,
            b,
            f"a/{path}" if old is not None else "/dev/null",
            f"b/{path}" if new is not None else "/dev/null",
            n=3,
        )
    )
    (fp,) = parse_diff([ln.rstrip("\n") for ln in lines], "test")
    return fp


def guide(changes: dict[str, tuple[str | None, str | None]], commits=(), source_files=None) -> dict:
    files = [file_patch(path, old, new) for path, (old, new) in changes.items()]
    pre = {p: (o.encode() if o is not None else None) for p, (o, _) in changes.items()}
    post = {p: (n.encode() if n is not None else None) for p, (_, n) in changes.items()}
    return in_all_languages(review_guide(files, pre.get, post.get, list(commits), "test", source_files))


def kinds(result: dict) -> list[str]:
    return [f["kind"] for f in result["findings"]]


def only(result: dict, kind: str) -> list[dict]:
    return [f for f in result["findings"] if f["kind"] == kind]


MOD = "vllm/mod.py"


@pytest.mark.parametrize(
    ("kind", "old", "new", "expect"),
    [
        ("public-symbol-removed", "def load():\n    pass\n", "def load_v2():\n    pass\n", True),
        ("public-symbol-removed", "def _load():\n    pass\n", "def _load2():\n    pass\n", False),
        ("signature-changed", "def f(a, b=1):\n    pass\n", "def f(a, c=1):\n    pass\n", True),
        ("signature-changed", "def f(a, b=1):\n    pass\n", "def f(a: int, b: int = 1):\n    pass\n", False),
        ("default-changed", "TIMEOUT = 5\n", "TIMEOUT = 600\n", True),
        ("default-changed", "TIMEOUT = 5\n", "TIMEOUT = 5  # seconds\n", False),
        ("default-changed", "class C:\n    keep: int = 1\n", "class C:\n    keep: int = 2\n", True),
        (
            "default-changed",
            "import os\nX = os.getenv('VLLM_A', '5')\n",
            "import os\nX = os.getenv('VLLM_A', '600')\n",
            True,
        ),
        (
            "default-changed",
            "import os\nX = os.getenv('VLLM_A', '5')\n",
            "import os\nY = os.getenv('VLLM_A', '5')\n",
            False,
        ),
        ("broad-except-swallows", "x = 1\n", "try:\n    x = 1\nexcept Exception:\n    pass\n", True),
        (
            "broad-except-swallows",
            "x = 1\n",
            "try:\n    x = 1\nexcept Exception:\n    logger.info('x')\n    raise\n",
            False,
        ),
        ("broad-except-swallows", "x = 1\n", "try:\n    x = 1\nexcept ValueError:\n    pass\n", False),
        ("hard-coded-path", "x = 1\n", "LOG = open('/tmp/log/x.txt', 'a')\n", True),
        ("hard-coded-path", "x = 1\n", "LOG = open('logs/x.txt', 'a')\n", False),
        ("magic-number", "x = 1\n", "def f(n):\n    return min(n, 1536)\n", True),
        ("magic-number", "x = 1\n", "POOL_SIZE = 1536\n\ndef f(n):\n    return min(n, 99)\n", False),
        (
            "env-set-at-runtime",
            "import os\n\ndef serve(args):\n    pass\n",
            "import os\n\ndef serve(args):\n    os.environ['VLLM_QWEN3X_TOOL_FIX'] = '1'\n",
            True,
        ),
        ("env-set-at-runtime", "import os\n", "import os\nos.environ.setdefault('VLLM_A', '0')\n", True),
        (
            "env-set-at-runtime",
            "import os\n",
            "import os\nv = os.environ['VLLM_A']\nd = {}\nd['VLLM_A'] = '1'\n",
            False,
        ),
    ],
)
def test_file_kinds(kind, old, new, expect):
    assert (kind in kinds(guide({MOD: (old, new)}))) is expect


def test_field_constraint_changed_gt_to_ge():
    old = "class SpeculativeConfig:\n    num_speculative_tokens: int = Field(default=None, gt=0)\n"
    new = old.replace("gt=0", "ge=0")
    (finding,) = only(guide({"vllm/config/speculative.py": (old, new)}), "field-constraint-changed")
    assert finding["severity"] == "high" and finding["line"] == 2
    assert "gt=0 → ge=0" in finding["message"]["en"] and "gt=0 改为 ge=0" in finding["message"]["zh"]
    same = guide({"vllm/config/speculative.py": (old, old.replace("None", "None "))})
    assert not only(same, "field-constraint-changed")


def test_new_env_var_with_nested_default_in_envs_py():
    old = 'import os\nenvironment_variables = {\n    "VLLM_OLD": lambda: os.getenv("VLLM_OLD", "0"),\n}\n'
    new = old.replace(
        "}\n",
        '    "VLLM_QWEN3X_TOOL_FIX": lambda: int(\n'
        '        os.getenv("VLLM_QWEN3X_TOOL_FIX",'
        ' os.getenv("VLLM_QWEN3CODER_STREAMING_FIX", "1"))\n    ),\n}\n',
    )
    found = {f["message"]["en"] for f in only(guide({"vllm/envs.py": (old, new)}), "new-env-var")}
    assert (
        "New environment variable `VLLM_QWEN3X_TOOL_FIX`"
        " (default `VLLM_QWEN3CODER_STREAMING_FIX` when set, else '1')." in found
    )
    assert not any("VLLM_OLD" in m for m in found)


ENVS_OLD = "import os\nif TYPE_CHECKING:\n    VLLM_OLD: int = 0\nenvironment_variables = {\n}\n"


def test_new_env_var_names_the_legacy_variable_it_falls_back_to():
    """envs.py declares ``VLLM_NEW: int = 1`` under TYPE_CHECKING, but the read is what runs: its
    default comes through the legacy variable, and the guide says so in both languages."""
    new = ENVS_OLD.replace(
        "    VLLM_OLD: int = 0\n", "    VLLM_OLD: int = 0\n    VLLM_NEW: int = 1\n"
    ).replace(
        "{\n}", '{\n    "VLLM_NEW": lambda: int(os.getenv("VLLM_NEW", os.getenv("VLLM_LEGACY", "1"))),\n}'
    )
    found = {
        f["message"]["en"].split("`")[1]: f
        for f in only(guide({"vllm/envs.py": (ENVS_OLD, new)}), "new-env-var")
    }
    finding = found["VLLM_NEW"]
    assert finding["message"]["en"] == (
        "New environment variable `VLLM_NEW` (default `VLLM_LEGACY` when set, else '1')."
    )
    assert finding["message"]["zh"] == "新增环境变量 `VLLM_NEW`（默认 `VLLM_LEGACY` 的值，未设置时为 '1'）。"
    assert finding["line"] == 6  # the read, not the annotation
    assert found["VLLM_LEGACY"]["message"]["en"] == "New environment variable `VLLM_LEGACY` (default '1')."


def test_new_env_var_without_a_fallback_names_none():
    new = ENVS_OLD.replace("{\n}", '{\n    "VLLM_NEW": lambda: int(os.getenv("VLLM_NEW", "1")),\n}')
    (finding,) = only(guide({"vllm/envs.py": (ENVS_OLD, new)}), "new-env-var")
    assert finding["message"]["en"] == "New environment variable `VLLM_NEW` (default '1')."
    assert finding["message"]["zh"] == "新增环境变量 `VLLM_NEW`（默认 '1'）。"


def test_assert_weakened():
    old = "def f(x):\n    assert x > 0\n    return x\n"
    assert only(guide({MOD: (old, "def f(x):\n    return x\n")}), "assert-weakened")
    logged = guide({MOD: (old, "def f(x):\n    if x <= 0:\n        logger.warning('bad')\n    return x\n")})
    assert "log" in only(logged, "assert-weakened")[0]["message"]["en"]
    moved = "def f(x):\n    y = x\n    assert x > 0\n    return y\n"
    assert not only(guide({MOD: (old, moved)}), "assert-weakened")


def test_raise_turned_into_log():
    old = "def f(x):\n    if x:\n        raise ValueError('no')\n"
    new = "def f(x):\n    if x:\n        logger.warning('no')\n"
    assert only(guide({MOD: (old, new)}), "assert-weakened")[0]["line"] == 3  # pre-image line


def test_near_whole_file_rewrite():
    old = "".join(f"a{i} = {i}\n" for i in range(300))
    new = "".join(f"b{i} = {i}\n" for i in range(300))
    assert only(guide({MOD: (old, new)}), "near-whole-file-rewrite")
    small = guide({MOD: (old, old.replace("a1 = 1\n", "a1 = 2\n"))})
    assert not only(small, "near-whole-file-rewrite")


def test_hot_path_touched():
    assert only(guide({"vllm/v1/core/block_pool.py": ("x = 1\n", "x = 2\n")}), "hot-path-touched")
    assert only(guide({"vllm/v1/core/sched/scheduler.py": ("x = 1\n", "x = 2\n")}), "hot-path-touched")
    assert not only(guide({"vllm/entrypoints/api.py": ("x = 1\n", "x = 2\n")}), "hot-path-touched")


def test_no_test_touched():
    assert only(guide({MOD: ("x = 1\n", "x = 2\n")}), "no-test-touched")
    with_test = guide({MOD: ("x = 1\n", "x = 2\n"), "tests/test_mod.py": ("", "def test_x():\n    pass\n")})
    assert not only(with_test, "no-test-touched")


def test_message_names_untouched_file_uses_source_commit_files():
    commit = Commit(
        "0" * 40, "A", "a@x", None, "feat: x", "- envs.py: new var\n- logger.py: log to /tmp/log/x.txt\n"
    )
    changes = {"vllm/logger.py": ("x = 1\n", "x = 2\n")}
    names = [f["message"]["en"] for f in only(guide(changes, [commit]), "message-names-untouched-file")]
    assert len(names) == 1 and "`envs.py`" in names[0]  # /tmp/log/x.txt is not a file mention
    covered = guide(changes, [commit], source_files=[{"vllm/envs.py", "vllm/logger.py"}])
    assert not only(covered, "message-names-untouched-file")


def test_priority_order_and_follow_ups():
    result = guide(
        {
            "tests/test_config.py": ("", "def test_x():\n    pass\n"),
            "vllm/v1/core/block_pool.py": ("x = 1\n", "x = 2\n"),
            "vllm/config/model.py": ("X = 1\n", "X = 2\n"),
        }
    )
    assert result["priority"]["level"] == "close-read"
    assert result["priority"]["reason"]["zh"].startswith("建议精读")
    assert [o["role"] for o in result["order"]] == ["contract", "consumer", "test"]
    assert any("X" in f["en"] for f in result["follow_ups"])
    calm = guide({"vllm/entrypoints/x.py": ("x = 1\n", "x = 2\n"), "tests/test_x.py": ("", "y = 1\n")})
    assert calm["priority"]["level"] == "skim" and calm["priority"]["reason"]["zh"].startswith("可快速浏览")


def test_env_set_at_runtime_names_the_variable_and_value_in_both_languages():
    new = "import os\n\ndef validate(args):\n    if args.tool_call_parser:\n"
    new += "        os.environ['VLLM_X'] = '1'\n"
    [finding] = only(
        guide({MOD: ("import os\n\ndef validate(args):\n    pass\n", new)}), "env-set-at-runtime"
    )
    assert finding["line"] == 5 and finding["severity"] == "medium"
    assert "`VLLM_X`" in finding["message"]["en"] and "'1'" in finding["message"]["en"]
    assert "`VLLM_X`" in finding["message"]["zh"] and "运行时" in finding["message"]["zh"]
