"""The readers of vLLM's own metadata: mergify labels, CODEOWNERS, buildkite CI steps.

Small hand-written fixtures for the variants; the slow tests read the pinned 0.33.0 sdist's files.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from patchkit.base.pin import prepare_base
from patchkit.errors import UserError
from patchkit.upstream.buildkite import parse_pipeline, pytest_targets
from patchkit.upstream.codeowners import owners_of, parse_codeowners
from patchkit.upstream.mergify import labels_of, parse_mergify, specificity
from patchkit.upstream.meta import MERGIFY as MERGIFY_PATH
from patchkit.upstream.meta import read_upstream
from patchkit.upstream.yamltext import FAST_LOADER, safe_load
from patchkit.values import Pin

MERGIFY = r"""
pull_request_rules:
- name: label-ci-build
  conditions:
    - label != stale
    - or:
      - files~=^\.github/
      - files=setup.py
      - files~=^requirements.*\.txt
  actions:
    label:
      add: [ci/build]
- name: label-v1
  conditions:
    - files~=^vllm/v1/
  actions:
    label:
      add: [v1]
- name: label-spec
  conditions:
    - or:
      - files~=^vllm/v1/spec_decode/
      - title~=(?i)eagle
      - and:
        - files~=^tests/v1/spec_decode/
        - -closed
  actions:
    label:
      add: [speculative-decoding]
- name: label-nvidia
  conditions:
    - or:
      - files~=cuda
      - not:
          files~=^vllm/
  actions:
    label:
      add: [nvidia]
- name: comment-only
  conditions:
    - check-failure=dco
  actions:
    comment:
      message: hi
- name: bad-regex
  conditions:
    - files~=^vllm/(unclosed
  actions:
    label:
      add: [broken]
"""


def test_mergify_labels_patterns_and_precedence() -> None:
    rules = parse_mergify(MERGIFY, "mergify.yml")
    assert [r.label for r in rules] == ["ci/build", "v1", "speculative-decoding", "nvidia"]
    spec = rules[2]
    assert [p.text for p in spec.patterns] == [
        "files~=^vllm/v1/spec_decode/",
        "files~=^tests/v1/spec_decode/",
    ]
    assert [p.text for p in rules[3].patterns] == ["files~=cuda"]  # nothing under `not`
    earned = labels_of("vllm/v1/spec_decode/cuda_eagle.py", rules)
    assert [label for label, _ in earned] == ["speculative-decoding", "v1", "nvidia"]
    assert labels_of("setup.py", rules)[0][0] == "ci/build"
    assert labels_of("requirements/cuda.txt", rules)[0][0] == "ci/build"  # ^requirements (12) > cuda (0)
    assert labels_of("setup.py.bak", rules) == []  # files= is the exact name
    assert labels_of("docs/x.md", rules) == []


def test_specificity_counts_the_literal_prefix_of_anchored_regexes() -> None:
    assert specificity(r"^vllm/v1/") == len("vllm/v1/")
    assert specificity(r"^\.github/") == len(".github/")
    assert specificity(r"^requirements.*\.txt") == len("requirements")
    assert specificity(r"^docs?/") == len("doc")  # the optional 's' does not count
    assert specificity("cuda") == 0


def test_mergify_tolerates_odd_shapes_and_reports_bad_yaml() -> None:
    assert parse_mergify("", "m") == []
    assert parse_mergify("pull_request_rules: 3\n", "m") == []
    assert parse_mergify("pull_request_rules:\n- 7\n- {name: x}\n", "m") == []
    with pytest.raises(UserError, match="invalid YAML"):
        parse_mergify("a: [b\n", "m")


CODEOWNERS = """\
# comment
/vllm/config @alice @bob
/vllm/config/cache.py @carol
*.cu @kernels-team
vllm/v1/spec_decode/ @dave  # trailing comment
docs/**/*.md @writers
/vllm/config/utils.py
"""


def test_codeowners_last_match_wins_and_patterns_follow_gitignore() -> None:
    rules = parse_codeowners(CODEOWNERS)
    assert owners_of("vllm/config/model.py", rules).owners == ("@alice", "@bob")
    assert owners_of("vllm/config/cache.py", rules).owners == ("@carol",)
    assert owners_of("csrc/attention/x.cu", rules).owners == ("@kernels-team",)  # no slash: anywhere
    assert owners_of("vllm/v1/spec_decode/eagle.py", rules).owners == ("@dave",)
    assert owners_of("tests/vllm/v1/spec_decode/x.py", rules) is None  # a slash inside anchors it
    assert owners_of("docs/a/b/c.md", rules).owners == ("@writers",)
    assert owners_of("vllm/config/utils.py", rules).owners == ()  # an owner-less later line clears it
    assert owners_of("vllm/configs.py", rules) is None  # a directory is not a prefix of a name


# the examples of GitHub's "About code owners" page, each with what GitHub says it means
GITHUB_RULES = """\
*       @global-owner1 @global-owner2
*.js    @js-owner #This is an inline comment.
docs/*  @doctocat
apps/ @octocat
/scripts/ @doctocat
**/logs @octocat
/apps/ @octocat
/apps/github
/build/logs/ @doctocat
path\\ with\\ spaces/ @space-owner
!docs/legal.md @nobody
[Ss]pecial.md @range-owner
\\#hash @hash-owner
"""


def test_codeowners_follows_githubs_documented_rules() -> None:
    rules = parse_codeowners(GITHUB_RULES)
    owner = lambda path: (rule.owners, rule.line) if (rule := owners_of(path, rules)) else None  # noqa: E731
    assert owner("src/main.py") == (("@global-owner1", "@global-owner2"), 1)
    assert owner("web/app.js") == (("@js-owner",), 2)  # the inline comment is no owner
    assert owner("docs/getting-started.md") == (("@doctocat",), 3)
    # "docs/*" owns only the direct children of docs/: a nested file falls back to the earlier "*"
    assert owner("docs/build-app/troubleshooting.md") == (("@global-owner1", "@global-owner2"), 1)
    assert owner("x/apps/y.py") == (("@octocat",), 4)  # "apps/" anywhere in the tree
    assert owner("scripts/run.sh") == (("@doctocat",), 5) and owner("x/scripts/run.sh")[1] == 1
    assert owner("a/b/logs/x.txt") == (("@octocat",), 6)
    assert owner("apps/github/x.py") == ((), 8)  # the last match has no owners: nobody in particular
    assert owner("build/logs/x.txt") == (("@doctocat",), 9)
    assert owner("path with spaces/readme.md") == (("@space-owner",), 10)  # an escaped space
    # no negation, no character ranges, no \# escape on GitHub: those lines decide nothing, and say so
    assert owner("docs/legal.md") == (("@doctocat",), 3)
    assert owner("Special.md") == (("@global-owner1", "@global-owner2"), 1)
    assert [(u.line, u.why) for u in rules.unsupported] == [
        (11, "negation"),
        (12, "character range"),
        (13, "escaped #"),
    ]


AREA = """\
group: Spec Decode
steps:
- label: ":nvidia: V1 Spec Decode"
  device: h200_35gb
  key: v1-spec-decode
  source_file_dependencies:
    - vllm/v1/
    - "!vllm/v1/worker/"
    - vllm/sampling_params.py
  commands:
    - export X=1
    - pytest -v -s -m 'not slow_test' v1/spec_decode --ignore=v1/spec_decode/test_big.py
    - pytest -v -s v1/test_a.py::test_b -k "fast or slow" && python3 x.py
- label: CPU parsers
  device: cpu-small
  working_dir: "/vllm-workspace/"
  source_file_dependencies: [vllm/tool_parsers]
  commands: ["python -m pytest tests/tool_parsers -n 2"]
- label: Always
  commands: pytest -v -s basic_correctness
"""

OLD_PIPELINE = """\
steps:
- label: Old CPU
  no_gpu: true
  source_file_dependencies: [vllm/]
  commands: [pytest -v -s test_config.py]
- label: Old GPU
  gpu: a100
  num_gpus: 2
  commands: [pytest -v -s distributed/test_x.py]
- group: nested
  steps:
  - label: Inner
    agent_pool: mi300_1
    commands: [pytest inner/]
"""


def test_buildkite_steps_devices_targets_and_coverage() -> None:
    steps = parse_pipeline(AREA, ".buildkite/test_areas/spec_decode.yaml")
    spec, cpu, always = steps
    assert (spec.label, spec.key, spec.device, spec.on_cpu) == (":nvidia: V1 Spec Decode", "v1-spec-decode",
                                                                "h200_35gb", False)  # fmt: skip
    assert spec.targets == ["tests/v1/spec_decode", "tests/v1/test_a.py::test_b"]
    assert spec.covers("vllm/v1/spec_decode/eagle.py") and spec.covering("vllm/v1/core/x.py") == "vllm/v1/"
    assert not spec.covers("vllm/v1/worker/gpu_model_runner.py")  # excluded by "!"
    assert spec.covers("vllm/sampling_params.py") and not spec.covers("vllm/v1x/a.py")
    assert (cpu.device, cpu.on_cpu, cpu.targets) == ("cpu-small", True, ["tests/tool_parsers"])
    assert cpu.covers("vllm/tool_parsers/qwen.py")
    assert always.device == "gpu" and always.targets == ["tests/basic_correctness"]
    assert not always.covers("vllm/anything.py")  # no dependencies: not a focused step


def test_buildkite_older_pipeline_variants() -> None:
    steps = parse_pipeline(OLD_PIPELINE, ".buildkite/test-pipeline.yaml")
    assert [(s.label, s.device) for s in steps] == [
        ("Old CPU", "cpu"),
        ("Old GPU", "a100"),
        ("Inner", "mi300_1"),
    ]
    assert steps[0].targets == ["tests/test_config.py"] and steps[2].targets == ["tests/inner/"]
    assert parse_pipeline("- label: bare list\n  commands: [pytest x.py]\n", "p")[0].targets == ["tests/x.py"]


def test_pytest_targets_ignore_options_and_other_commands() -> None:
    assert pytest_targets("cd .. && VLLM_X=1 pytest -x -n 4 --timeout 30 a.py b/ -o x=y", "tests/") == [
        "tests/a.py",
        "tests/b/",
    ]
    assert pytest_targets("python examples/run.py --model m", "tests/") == []
    assert pytest_targets("pytest $TESTS", "tests/") == []


def test_read_upstream_on_a_bare_tree_says_what_is_missing(tmp_path: Path) -> None:
    meta = read_upstream(tmp_path)
    assert meta.labels == [] and meta.owners == [] and meta.steps == []
    assert meta.missing == [".github/mergify.yml", ".github/CODEOWNERS", ".buildkite/test_areas/*.yaml"]
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github" / "mergify.yml").write_text(MERGIFY)
    (tmp_path / ".buildkite").mkdir()
    (tmp_path / ".buildkite" / "test-pipeline.yaml").write_text(OLD_PIPELINE)
    meta = read_upstream(tmp_path)
    assert meta.missing == [".github/CODEOWNERS"] and len(meta.steps) == 3 and len(meta.labels) == 4


ANCHORS = """\
common: &deps
  - vllm/a.py
  - "vllm/b.py"
defaults: &step
  device: cpu-small
  timeout_in_minutes: 35
steps:
- <<: *step
  label: ":computer: (CPU) x"
  source_file_dependencies: *deps
  commands: ['pytest -v -s -m "cpu_test" x', 1.5, yes, null, ~, 2024-01-01]
"""


def test_the_fast_loader_gives_what_safe_load_gives() -> None:
    """libyaml's parser (when PyYAML has it) under the same safe constructor: anchors, merge keys,
    quoting and YAML 1.1 scalars come out as with yaml.safe_load; bad YAML still raises."""
    import yaml

    assert FAST_LOADER is not None  # PyYAML's wheels carry libyaml: the audit takes the fast path
    for text in (ANCHORS, MERGIFY, OLD_PIPELINE):
        assert safe_load(text) == yaml.safe_load(text)
    with pytest.raises(yaml.YAMLError):
        safe_load("steps: [unclosed\n")
    with pytest.raises(UserError, match="invalid YAML"):
        parse_pipeline("steps: [unclosed\n", "x.yaml")


@pytest.mark.slow
def test_the_fast_loader_reads_the_pinned_sdists_metadata_as_safe_load_does(pinned_base: Path) -> None:
    import yaml

    files = [pinned_base / MERGIFY_PATH, *sorted((pinned_base / ".buildkite" / "test_areas").glob("*.yaml"))]
    assert len(files) > 30
    for path in files:
        text = path.read_text("utf-8")
        assert safe_load(text) == yaml.safe_load(text), path


@pytest.mark.slow
def test_readers_on_the_pinned_sdist(pinned_base: Path) -> None:
    meta = read_upstream(pinned_base)
    assert meta.missing == []
    labels = {r.label for r in meta.labels}
    assert {"speculative-decoding", "tool-calling", "scheduler", "quantization", "ci/build"} <= labels
    assert labels_of("vllm/v1/spec_decode/eagle.py", meta.labels)[0][0] == "speculative-decoding"
    assert labels_of("vllm/model_executor/layers/quantization/fp8.py", meta.labels)[0][0] == "quantization"
    assert owners_of("vllm/config/cache.py", meta.owners).owners  # somebody reviews the KV cache config
    assert len(meta.steps) > 100
    devices = {s.device for s in meta.steps}
    assert any(d.startswith("cpu") for d in devices) and "h100" in devices
    covering = [s for s in meta.steps if s.covers("vllm/v1/spec_decode/eagle.py")]
    assert any(t.startswith("tests/v1/spec_decode") for s in covering for t in s.targets)
    assert all(t.startswith("tests/") for s in meta.steps for t in s.targets)


OLDER = Pin(source="index", name="vllm", version="0.9.0",
            sha256="78e3e71fbbd1adfc3b7095b4ab4b6d341c0cffc9e8b96f0c74db275d60108902")  # fmt: skip


@pytest.mark.slow
def test_readers_on_an_older_release_with_the_single_test_pipeline() -> None:
    """vLLM 0.9.0 (sdist from the index, cached like the pin): one .buildkite/test-pipeline.yaml,
    `gpu:`/`no_gpu:` instead of `device:`, fewer labels."""
    meta = read_upstream(prepare_base(OLDER))
    assert meta.missing == []
    assert {s.file for s in meta.steps} == {".buildkite/test-pipeline.yaml"}
    devices = {s.device for s in meta.steps}
    assert {"cpu", "gpu", "a100"} <= devices
    assert {"ci/build", "v1", "tool-calling"} <= {r.label for r in meta.labels}
    covering = [s for s in meta.steps if s.covers("vllm/v1/spec_decode/eagle.py")]
    assert any(t.startswith("tests/v1") for s in covering for t in s.targets)
    assert all(t.startswith("tests/") for s in meta.steps for t in s.targets)
