"""The finding kinds of issue 19 and its precision fixes: one positive and one negative case each,
on hand-written sources."""

from __future__ import annotations

import pytest

from tests.test_guide import guide, kinds, only

MOD = "vllm/mod.py"
FLAG_OLD = "def serve(request, out):\n    out.append(1)\n    return out\n"
FLAG_NEW = "def serve(request, out):\n    if request.stream_usage:\n        out.append(1)\n    return out\n"
THINK_OLD = "def extract(self, request, text):\n    return self.split(text)\n"
THINK_NEW = (
    "def extract(self, request, text):\n"
    "    kw = request.chat_template_kwargs\n"
    "    if request.chat_template_kwargs is None or kw.get('thinking', False) is False:\n"
    "        return None, text\n"
    "    return self.split(text)\n"
)
REQ_OLD = "class Request:\n    def __init__(self, kv_transfer_params):\n        self.num_cached_tokens = -1\n"
FLAG_NOT = "def serve(request, out):\n    if not request.skip:\n        out.append(1)\n    return out\n"


@pytest.mark.parametrize(
    ("kind", "old", "new", "expect"),
    [
        (
            "forced-setting",
            "def f(vllm_config):\n    pass\n",
            "def f(vllm_config):\n    vllm_config.cache_config.enable_prefix_caching = False\n",
            True,
        ),
        (
            "forced-setting",
            "def f(self):\n    pass\n",
            "def f(self):\n    self.compilation_config.cudagraph_mode = CUDAGraphMode.PIECEWISE\n",
            True,
        ),
        (
            "forced-setting",
            "class C:\n    pass\n",
            "class C:\n    def f(self):\n        self.size = 4\n",
            False,
        ),
        ("forced-setting", "x = 1\n", "def f(req):\n    req.output.text = ''\n", False),
        ("off-unless-request-flag", FLAG_OLD, FLAG_NEW, True),
        ("off-unless-request-flag", FLAG_OLD, FLAG_NOT, False),
        ("off-unless-request-flag", THINK_OLD, THINK_NEW, True),
        ("off-unless-request-flag", THINK_OLD, THINK_NEW.replace("return None, text", "log(text)"), False),
        (
            "exception-type-changed",
            "def f():\n    raise NotImplementedError('x')\n",
            "def f():\n    raise ValueError('x')\n",
            True,
        ),
        (
            "exception-type-changed",
            "def f():\n    raise ValueError('x')\n",
            "def f():\n    raise ValueError('y')\n",
            False,
        ),
        (
            "client-value-replaces-server",
            REQ_OLD,
            REQ_OLD + "        if self.kv_transfer_params is not None:\n"
            "            self.num_cached_tokens = self.kv_transfer_params.get('num_cached_tokens', -1)\n",
            True,
        ),
        (
            "client-value-replaces-server",  # the engine's own request object, not client data
            "def f(request):\n    request.num_computed_tokens = computed\n",
            "def f(request):\n    request.num_computed_tokens = request.num_tokens - 1\n",
            False,
        ),
        (
            "off-unless-request-flag",  # a None guard on the value it uses is no flag
            "def f(finished_request, h):\n    h.observe(\n        finished_request.max_tokens)\n",
            "def f(finished_request, h):\n    if finished_request.max_tokens:\n        h.observe(\n"
            "            finished_request.max_tokens)\n",
            False,
        ),
        (
            "off-unless-request-flag",  # the old path still runs in the else: on by default
            FLAG_OLD,
            "def serve(request, out):\n    if request.fast:\n        out.append(2)\n"
            "    else:\n        out.append(1)\n    return out\n",
            False,
        ),
        ("hard-coded-cpu-ids", "import os\n", "import os\nos.sched_setaffinity(0, {0, 1, 2, 3})\n", True),
        ("hard-coded-cpu-ids", "import os\n", "import os\nos.sched_setaffinity(0, cores)\n", False),
        ("hard-coded-cpu-ids", "x = 1\n", "CMD = 'taskset -c 0-7 python serve.py'\n", True),
        (
            "cache-call-removed",
            "def f(self, k):\n    self.reset_prefix_cache()\n    return k\n",
            "def f(self, k):\n    return k\n",
            True,
        ),
        (
            "cache-call-removed",
            "def f(self, k):\n    self.reset_prefix_cache()\n    return k\n",
            "def f(self, k):\n    self.reset_prefix_cache()\n    return k + 1\n",
            False,
        ),
        ("cli-flag-added", "def f(p):\n    pass\n", "def f(p):\n    p.add_argument('--fast-path')\n", True),
        ("cli-flag-added", "def f(p):\n    pass\n", "def f(p):\n    p.add_argument('path')\n", False),
        (
            "call-passes-unknown-arg",
            "def load(a):\n    return a\n\nx = load(1)\n",
            "def load(a):\n    return a\n\nx = load(1, strict=True)\n",
            True,
        ),
        (
            "call-passes-unknown-arg",
            "def load(a, **kw):\n    return a\n\nx = load(1)\n",
            "def load(a, **kw):\n    return a\n\nx = load(1, strict=True)\n",
            False,
        ),
        (
            "broad-except-swallows",
            "def f():\n    pass\n",
            "def f():\n    try:\n        g()\n    except Exception:\n        return\n",
            True,
        ),
        (
            "broad-except-swallows",
            "def f():\n    pass\n",
            "def f():\n    try:\n        g()\n    except Exception:\n        return fallback()\n",
            False,
        ),
    ],
)
def test_python_kinds(kind, old, new, expect):
    assert (kind in kinds(guide({MOD: (old, new)}))) is expect


def test_forced_prefix_caching_is_high_and_says_what_it_forces():
    (f,) = only(
        guide({MOD: ("x = 1\n", "def f(c):\n    c.cache_config.enable_prefix_caching = False\n")}),
        "forced-setting",
    )
    assert f["severity"] == "high"
    assert "`cache_config.enable_prefix_caching`" in f["message"]["en"] and "`False`" in f["message"]["en"]
    assert "强制" in f["message"]["zh"]


KERNEL_OLD = "#include <x>\nvoid host() {}\n"
KERNEL_NEW = (
    "#include <x>\n"
    "template <int N>\n"
    "__global__ void __launch_bounds__(256) rms_norm_kernel(float* out) {}\n"
    "template void run<128>(float*);\n"
    "void host() {}\n"
)


@pytest.mark.parametrize(
    ("path", "old", "new", "kind", "expect"),
    [
        ("csrc/layernorm.cu", KERNEL_OLD, KERNEL_NEW, "kernel-changed", True),
        ("csrc/layernorm.cu", KERNEL_OLD, KERNEL_OLD.replace("{}", "{ }"), "kernel-changed", False),
        (
            "csrc/torch_bindings.cpp",
            "void f() {\n}\n",
            'void f() {\n  ops.def(\n      "my_op(Tensor! out, Tensor x) -> ()");\n}\n',
            "op-schema-unwrapped",
            True,
        ),
        (
            "requirements/cuda.txt",
            "torch==2.5.0\nxformers\n",
            "torch==2.6.0\nxformers\n",
            "dependency-pin-changed",
            True,
        ),
        (
            "requirements/cuda.txt",
            "torch==2.5.0\n",
            "# note\ntorch==2.5.0\n",
            "dependency-pin-changed",
            False,
        ),
        (
            "pyproject.toml",
            '[project]\ndependencies = [\n  "numpy<2",\n]\n',
            '[project]\ndependencies = [\n  "numpy<3",\n]\n',
            "dependency-pin-changed",
            True,
        ),
        (
            ".buildkite/test-pipeline.yaml",
            "steps:\n- label: Core\n  timeout_in_minutes: 30\n",
            "steps:\n- label: Core\n  timeout_in_minutes: 90\n",
            "ci-changed",
            True,
        ),
        (
            ".buildkite/test-pipeline.yaml",
            "steps:\n- label: Core\n  timeout_in_minutes: 30\n",
            "steps:\n- label: Core\n  timeout_in_minutes: 30\n  soft_fail: true\n",
            "ci-changed",
            False,
        ),
        (
            ".github/workflows/ci.yml",
            "jobs:\n  steps:\n  - name: lint\n",
            "jobs:\n  steps:\n  - name: lint\n  - name: gpu tests\n",
            "ci-changed",
            True,
        ),
    ],
)
def test_file_kinds(path, old, new, kind, expect):
    assert (kind in kinds(guide({path: (old, new)}))) is expect


def test_op_schema_with_its_python_wrapper_in_the_patch_is_in_sync():
    result = guide(
        {
            "csrc/torch_bindings.cpp": (
                "void f() {\n}\n",
                'void f() {\n  ops.def("my_op(Tensor x) -> ()");\n}\n',
            ),
            "vllm/_custom_ops.py": (
                "import torch\n",
                "import torch\n\ndef my_op(x):\n    torch.ops._C.my_op(x)\n",
            ),
        }
    )
    assert "op-schema-unwrapped" not in kinds(result)


def test_kernel_finding_names_the_kernel_and_is_high():
    (f,) = only(guide({"csrc/layernorm.cu": (KERNEL_OLD, KERNEL_NEW)}), "kernel-changed")
    assert (
        f["severity"] == "high"
        and "rms_norm_kernel" in f["message"]["en"]
        and "template run<…>" in f["message"]["en"]
    )


def test_dependency_pin_names_old_and_new():
    (f,) = only(
        guide({"requirements/cuda.txt": ("tilelang==0.1.9\n", "tilelang==0.1.10\n")}),
        "dependency-pin-changed",
    )
    assert "==0.1.9" in f["message"]["en"] and "==0.1.10" in f["message"]["en"]


def _import_guide(importer: str) -> dict:
    return guide(
        {
            "vllm/lib.py": ("def present():\n    pass\n", "def present():\n    pass\n\nX = 1\n"),
            "vllm/user.py": ("x = 1\n", importer),
        }
    )


def test_import_of_a_name_that_exists_nowhere():
    (f,) = only(_import_guide("from vllm.lib import present, absent\n"), "import-missing")
    assert f["severity"] == "high" and "`absent`" in f["message"]["en"] and "`vllm.lib`" in f["message"]["en"]


def test_import_of_names_that_exist_is_fine():
    assert "import-missing" not in kinds(
        _import_guide("from vllm.lib import present, X\nfrom os import path\n")
    )


# --- precision fixes ---------------------------------------------------------------------------------


def test_a_commit_message_saying_a_file_is_left_untouched_is_no_claim():
    from patchkit.diff.model import Commit

    files = {"vllm/a.py": ("x = 1\n", "x = 2\n")}
    said = Commit(
        None, "A", "a@x", "", "fix a", "Change a.py; b.py and envs.py are left untouched.\n不改 c.py\n"
    )
    claimed = Commit(None, "A", "a@x", "", "fix a", "Change a.py and b.py.\n")
    assert "message-names-untouched-file" not in kinds(guide(files, [said]))
    (f,) = only(guide(files, [claimed]), "message-names-untouched-file")
    assert "`b.py`" in f["message"]["en"]


def test_all_is_not_a_default_and_dunders_and_pytestmark_are_not_api():
    old = "__all__ = ['a']\n__version__ = '1'\nLIMIT = 1\n"
    new = "__all__ = ['a', 'b']\n__version__ = '2'\nLIMIT = 2\n"
    found = only(guide({MOD: (old, new)}), "default-changed")
    assert [f["message"]["en"].split("`")[1] for f in found] == ["LIMIT"]
    test_old = (
        "import pytest\npytestmark = pytest.mark.cpu\n\ndef test_x():\n    pass\n\ndef helper():\n    pass\n"
    )
    gone = kinds(guide({"tests/test_x.py": (test_old, "import pytest\n\ndef test_y():\n    pass\n")}))
    assert gone.count("public-symbol-removed") == 1  # `helper`, not `pytestmark` nor `test_x`


def test_a_removed_pass_through_init_is_not_a_removed_symbol():
    old = (
        "class A(B):\n    def __init__(self, x):\n        super().__init__(x)\n\n"
        "    def run(self):\n        pass\n"
    )
    new = "class A(B):\n    def run(self):\n        pass\n"
    assert "public-symbol-removed" not in kinds(guide({MOD: (old, new)}))
    real = "class A(B):\n    def __init__(self, x):\n        self.x = x\n\n    def run(self):\n        pass\n"
    assert "public-symbol-removed" in kinds(guide({MOD: (real, new)}))


def test_getenv_keyword_default_is_read():
    (f,) = only(
        guide({MOD: ("import os\n", "import os\nN = int(os.getenv('VLLM_N', default=5))\n")}), "new-env-var"
    )
    assert "(default 5)" in f["message"]["en"]


def test_signature_direction_optional_parameter_is_not_check_every_caller():
    (f,) = only(
        guide({MOD: ("def f(a):\n    pass\n", "def f(a, b=None):\n    pass\n")}),
        "signature-changed",
    )
    assert f["severity"] == "low" and "existing callers still work" in f["message"]["en"]
    (g,) = only(guide({MOD: ("def f(a, b=None):\n    pass\n", "def f(a):\n    pass\n")}), "signature-changed")
    assert "check every caller" in g["message"]["en"] and "`b`" in g["message"]["en"]


def test_a_template_counts_as_untested_only_when_code_names_it():
    template = {"vllm/templates/chat.jinja": ("{{ a }}\n", "{{ b }}\n")}
    assert "no-test-touched" not in kinds(guide(template))
    used = dict(template, **{MOD: ("T = 'x'\n", "T = 'chat.jinja'\n")})
    (f,) = only(guide(used), "no-test-touched")
    assert "vllm/templates/chat.jinja" in f["evidence"]


def test_a_negation_on_the_next_line_of_a_wrapped_sentence_is_no_claim():
    """1Cat-vLLM PR #239's lint commit: "... drift in fused_mha.h and\nfoo.cu ... is left untouched."
    named fused_mha.h as changed (the held-out guide evaluation's false finding)."""
    from patchkit.diff.model import Commit

    files = {"vllm/a.py": ("x = 1\n", "x = 2\n")}
    body = "- a.py: change x.\n\nThe drift in fused_mha.h and\nkernel.cu (at the base) is left untouched.\n"
    said = Commit(None, "A", "a@x", "", "f", body)
    assert "message-names-untouched-file" not in kinds(guide(files, [said]))
    items = "- a.py: change x, and\n  b.py too\n- c.py is unchanged\n"  # each item is its own sentence
    found = only(guide(files, [Commit(None, "A", "a@x", "", "f", items)]), "message-names-untouched-file")
    assert [f["message"]["en"].split("`")[1] for f in found] == ["b.py"]


def test_items_under_a_negated_heading_are_no_claims():
    from patchkit.diff.model import Commit

    files = {"vllm/a.py": ("x = 1\n", "x = 2\n")}
    body = "- a.py: change x\n\n已确认 v1.3.0 内置（无需重放）:\n- cudagraph sizes (config/vllm.py)\n\n"
    body += "- b.py: claimed\n"
    found = only(guide(files, [Commit(None, "A", "a@x", "", "fix", body)]), "message-names-untouched-file")
    assert [f["message"]["en"].split("`")[1] for f in found] == ["b.py"]
    read_via = Commit(None, "A", "a@x", "", "fix", "VLLM_X: os.environ 直读，不经 envs.py\n")
    assert "message-names-untouched-file" not in kinds(guide(files, [read_via]))


def test_setattr_on_another_config_is_a_forced_setting():
    old = "def f(self):\n    pass\n"
    new = "def f(self):\n    setattr(self.draft_model_config, 'max_model_len', n)\n"
    (f,) = only(guide({MOD: (old, new)}), "forced-setting")
    assert "`draft_model_config.max_model_len`" in f["message"]["en"]
    assert "forced-setting" not in kinds(guide({MOD: (old, "def f(self):\n    setattr(self, 'x', 1)\n")}))


def test_a_client_field_handed_on_by_keyword_replaces_nothing():
    old = "def f(a, cls):\n    req = cls(kv_transfer_params=a.kv_transfer_params)\n    req = None\n"
    new = "def f(a, cls):\n    req = cls(kv_transfer_params=a.kv_transfer_params, x=1)\n    req = None\n"
    assert "client-value-replaces-server" not in kinds(guide({"vllm/entrypoints/x.py": (old, new)}))


def test_cpu_ids_in_a_default_list_and_not_the_pid():
    line = "import os\nCORES = os.getenv('TOKENIZER_AFFINITY_CORES', '11, 12, 13, 14')\n"
    assert "hard-coded-cpu-ids" in kinds(guide({MOD: ("import os\n", line)}))
    pid_only = "import os\nos.sched_setaffinity(0, [core_id])\n"
    assert "hard-coded-cpu-ids" not in kinds(guide({MOD: ("import os\n", pid_only)}))


def test_pins_with_spaces_and_ranges():
    found = only(
        guide(
            {
                "requirements/common.txt": (
                    "numpy\ntransformers >= 4.51.1\n",
                    "numpy == 1.26\ntransformers >= 4.51.1, <= 4.53.2\n",
                )
            }
        ),
        "dependency-pin-changed",
    )
    assert [f["message"]["en"] for f in found] == [
        "Dependency `numpy` changed from * to ==1.26.",
        "Dependency `transformers` changed from >=4.51.1 to >=4.51.1,<=4.53.2.",
    ]


def test_configuring_a_copy_the_patch_made_is_not_forcing_a_setting():
    new = (
        "import copy\n\ndef f(self, kv_cache_config):\n"
        "    self.cpu_config = copy.deepcopy(kv_cache_config)\n    self.cpu_config.num_blocks = 4\n"
    )
    assert "forced-setting" not in kinds(guide({MOD: ("import copy\n", new)}))


def test_a_unit_conversion_is_not_a_magic_number():
    assert "magic-number" not in kinds(guide({MOD: ("x = 1\n", "def f(d):\n    return d * 1000\n")}))
    assert "magic-number" in kinds(guide({MOD: ("x = 1\n", "def f(d):\n    return d * 1536\n")}))


def test_existing_code_put_behind_an_environment_switch_is_off_by_default():
    old = "import os\n\ndef f(n, budget):\n    n = min(n, budget)\n    return n\n"
    new = (
        "import os\nFORCE = os.getenv('FORCE', '0') == '1'\n\ndef f(n, budget):\n"
        "    if FORCE:\n        n = min(n, budget)\n    return n\n"
    )
    (f,) = only(guide({MOD: (old, new)}), "off-unless-request-flag")
    assert "`FORCE`" in f["message"]["en"]
    plain = new.replace("if FORCE:", "if n > 3:")
    assert "off-unless-request-flag" not in kinds(guide({MOD: (old, plain)}))


def test_a_large_host_side_change_says_so():
    body = "".join(f"int f{i}(int x) {{ return x + {i}; }}\n" for i in range(90))
    (f,) = only(guide({"csrc/ops/host.cpp": ("", body)}), "kernel-changed")
    assert (
        f["severity"] == "medium"
        and "host code only" in f["message"]["en"]
        and "仅主机端代码" in f["message"]["zh"]
    )
