"""The test venv follows the pin (issue 27): torch and the test tools from the base's own files,
a CPU build where the indexes have one, never a constant; the record says where torch came from."""

from __future__ import annotations

import json
import zipfile

import pytest

from patchkit.base import package_index
from patchkit.testrun import testenv, torchpin

CPU_TXT_083 = (  # the shape of vLLM 0.8.3's requirements/cpu.txt
    "-r common.txt\n\n# Dependencies for CPUs\n"
    'torch==2.6.0+cpu; platform_machine == "x86_64"\n'
    'torch==2.6.0; platform_system == "Darwin"\n'
    'torch==2.6.0; platform_machine == "ppc64le" or platform_machine == "aarch64"\n'
    'torchaudio; platform_machine != "ppc64le"\n'
)
CPU_TXT_033 = (  # the shape of 0.33.0's
    "-r common.txt\nsetuptools==78.1.1 # comment\n"
    'torch==2.14.0+cpu; platform_machine == "x86_64" or platform_machine == "aarch64"\n'
    'torch==2.14.0; platform_system == "Darwin"\n'
)


def _base(tmp_path, files):
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


@pytest.fixture(autouse=True)
def _x86(monkeypatch):
    import platform

    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(platform, "system", lambda: "Linux")


@pytest.mark.parametrize("files, requirement, source", [
    ({"requirements/cpu.txt": CPU_TXT_083, "requirements/test.in": "torch==2.6.0\n"},
     "torch==2.6.0+cpu", "requirements/cpu.txt:4"),
    ({"requirements/cpu.txt": CPU_TXT_033}, "torch==2.14.0+cpu", "requirements/cpu.txt:3"),
    ({"requirements/test.in": "pytest\ntorch==2.5.1 # the tests\n"},
     "torch==2.5.1", "requirements/test.in:2"),
    ({"pyproject.toml": '[build-system]\nrequires = ["torch == 2.4.0", "wheel"]\n'},
     "torch==2.4.0", "pyproject.toml [build-system] requires"),
])  # fmt: skip
def test_torch_is_what_the_bases_own_files_name(tmp_path, files, requirement, source):
    named = torchpin.named_torch(_base(tmp_path, files))
    assert (named.requirement, named.source) == (requirement, source)


def test_the_override_is_said_with_what_the_base_names(tmp_path):
    named = torchpin.named_torch(_base(tmp_path, {"requirements/cpu.txt": CPU_TXT_083}), "torch==2.13.0")
    assert named.requirement == "torch==2.13.0" and named.named == "torch==2.6.0+cpu"
    assert "patchkit.toml" in named.describe() and "2.6.0+cpu" in named.describe()


def test_the_test_tools_follow_the_bases_lock_file(tmp_path):
    base = _base(tmp_path, {"requirements/test.txt": "pytest==8.3.3\n    # via -r test.in\ntblib==3.0.0\n"})
    assert torchpin.test_tools(base) == [
        "pytest==8.3.3", "tblib==3.0.0", "pytest-timeout", "pytest-xdist", "coverage==7.10.6"
    ]  # fmt: skip
    pinned = _base(tmp_path / "pins", {"requirements/test.txt": "coverage==7.9.1\n"})
    assert torchpin.test_tools(pinned)[-1] == "coverage==7.9.1"  # the base's lock pin wins over ours


def _rank(filename):
    return 0 if "x86_64" in filename or "none-any" in filename else None


def _local_wheel(folder, version, needs=()):
    path = folder / f"torch-{version}-cp311-cp311-manylinux_2_28_x86_64.whl"
    meta = (
        "Metadata-Version: 2.1\nName: torch\nVersion: "
        + version
        + "\n"
        + "".join(f"Requires-Dist: {n}\n" for n in needs)
    )
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"torch-{version}.dist-info/METADATA", meta)
    return (path.name, path.as_uri(), None)


def test_a_cpu_build_of_the_named_release_is_chosen(tmp_path):
    named = torchpin.named_torch(_base(tmp_path / "b", {"requirements/cpu.txt": CPU_TXT_083}))
    (tmp_path / "w").mkdir()
    offered = [("https://pypi.org/simple/torch/", [("torch-2.6.0-cp311-cp311-manylinux_2_28_x86_64.whl",
                                                   "https://files/torch-2.6.0.whl", "00")]),
               ("https://download.pytorch.org/whl/cpu/torch/",
                [("torch-2.6.0+cpu-cp311-cp311-linux_x86_64.whl", "https://cpu/torch.whl", "11"),
                 ("torch-2.6.0+cpu-cp311-cp311-win_amd64.whl", "https://cpu/win.whl", "22")])]  # fmt: skip
    requirement, note = torchpin.choose(named, offered, {}, _rank)
    assert requirement == "torch==2.6.0+cpu" and "download.pytorch.org" in note


def test_no_cuda_torch_and_no_other_release_a_clear_reason_instead(tmp_path):
    named = torchpin.named_torch(_base(tmp_path / "b", {"requirements/cpu.txt": CPU_TXT_083}))
    (tmp_path / "w").mkdir()
    offered = [("file:///opt/wheels", [_local_wheel(tmp_path / "w", "2.13.0+cpu")]),
               ("https://pypi.org/simple/torch/", [("torch-2.6.0-cp311-cp311-manylinux_2_28_x86_64.whl",
                                                   "https://files/torch-2.6.0.whl", "00")])]  # fmt: skip
    with pytest.raises(torchpin.TorchUnavailable) as raised:
        torchpin.choose(named, offered, {}, _rank)
    said = str(raised.value)
    assert "requirements/cpu.txt:4 names torch==2.6.0+cpu" in said and "CUDA" in said
    assert "[audit] torch" in said and "2.13.0" not in said.split("builds of that release there")[1]


def test_a_local_wheel_without_cuda_requirements_is_a_cpu_build_and_one_with_them_is_not(tmp_path):
    (tmp_path / "w").mkdir()
    cuda = _local_wheel(tmp_path / "w", "2.14.1", needs=['nvidia-cudnn-cu13==9; platform_system == "Linux"'])
    named = torchpin.Named("torch==2.14.1", "requirements/cpu.txt:3", "torch==2.14.1")
    with pytest.raises(torchpin.TorchUnavailable):
        torchpin.choose(named, [("file:///w", [cuda])], {}, _rank)
    (tmp_path / "c").mkdir()
    cpu = _local_wheel(tmp_path / "c", "2.14.1", needs=["filelock"])
    assert torchpin.choose(named, [("file:///c", [cpu])], {}, _rank)[0] == "torch==2.14.1"


def test_pips_constraints_are_named_when_they_exclude_the_release(tmp_path):
    (tmp_path / "c.txt").write_text("torch<=2.14.1\n")
    named = torchpin.Named("torch==2.15.0", "requirements/cpu.txt:3", "torch==2.15.0")
    offered = [("x", [("torch-2.15.0+cpu-cp311-cp311-linux_x86_64.whl", "https://cpu/t.whl", "00")])]
    with pytest.raises(torchpin.TorchUnavailable, match=r"constraints allow only torch<=2.14.1"):
        torchpin.choose(named, offered, {"constraint": str(tmp_path / "c.txt")}, _rank)


def test_the_venv_follows_the_pin_and_records_where_torch_came_from(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))
    base = _base(tmp_path / "b", {"requirements/cpu.txt": CPU_TXT_083, "requirements/common.txt": "numpy\n"})
    other = _base(tmp_path / "o", {"requirements/cpu.txt": CPU_TXT_033, "requirements/common.txt": "numpy\n"})
    assert testenv.env_key(base) != testenv.env_key(other)  # another pin, another torch: another venv
    offered = [("cpu-index", [("torch-2.6.0+cpu-cp311-cp311-linux_x86_64.whl", "https://cpu/t.whl", "00")])]
    monkeypatch.setattr(package_index, "candidates", lambda name: iter(offered))
    monkeypatch.setattr(package_index, "wheel_rank", _rank)
    built = {}

    def fake_build(uv, venv, base_root, python, torch):
        built["torch"] = torch
        venv.mkdir(parents=True, exist_ok=True)
        (venv / "bin").mkdir(exist_ok=True)
        return {"installer": "uv", "steps": []}

    monkeypatch.setattr(testenv, "uv_binary", lambda: "uv")
    monkeypatch.setattr(testenv, "_build_with_uv", fake_build)
    python = testenv.prepare(base)
    assert built["torch"] == "torch==2.6.0+cpu"
    marker = json.loads(
        (tmp_path / "cache").joinpath(python).parent.parent.joinpath(testenv.READY).read_text()
    )
    assert marker["torch"]["source"] == "requirements/cpu.txt:4"
    assert (
        testenv.torch_origin(python)
        == "torch==2.6.0+cpu (CPU build 2.6.0+cpu from cpu-index), named by requirements/cpu.txt:4"
    )
    with pytest.raises(testenv.TestEnvError, match="no CPU build"):
        testenv.prepare(other)  # 0.33.0's 2.14.0+cpu is not offered: said, nothing built
    assert testenv.ready_python(other) is None


def test_the_record_says_where_the_test_venvs_torch_came_from(tmp_path, monkeypatch):
    from patchkit.audit.gates import tests as gate
    from patchkit.testrun.pytestrun import TestSettings

    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    torch = {"requirement": "torch==2.6.0+cpu", "source": "requirements/cpu.txt:4",
             "named": "torch==2.6.0+cpu",
             "note": "CPU build 2.6.0+cpu from https://download.pytorch.org/whl/cpu/torch/"}  # fmt: skip
    (venv / testenv.READY).write_text(json.dumps({"installer": "uv", "torch": torch}))
    monkeypatch.setattr(gate, "environment", lambda python: {"interpreter": python, "torch": "2.6.0+cpu"})
    settings = TestSettings(python=str(venv / "bin" / "python"), base_root=tmp_path, base_hash="")
    env = gate.GATE.environment({"tests": settings})["tests"]
    assert env["torch_from"].endswith("named by requirements/cpu.txt:4") and env["torch"] == "2.6.0+cpu"
