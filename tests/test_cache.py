from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from patchkit import cache


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_cache_root_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_root() == tmp_path / "cache"
    monkeypatch.delenv("PATCHKIT_CACHE")
    assert cache.cache_root() == tmp_path / "xdg" / "patchkit"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_root() == tmp_path / "home" / ".cache" / "patchkit"


@pytest.mark.parametrize("key", ["", "..", "a/b", "../x", ".hidden", "a..b"])
def test_store_dir_rejects_unsafe_names(key: str) -> None:
    with pytest.raises(ValueError):
        cache.store_dir("base", key)


def test_build_entry_builds_once(cache_dir: Path) -> None:
    calls = []

    def build(tmp: Path) -> None:
        calls.append(tmp)
        (tmp / "f").write_text("x")

    first = cache.build_entry("base", "k1", build)
    second = cache.build_entry("base", "k1", build)
    assert first == second == cache_dir / "base" / "k1"
    assert (first / "f").read_text() == "x"
    assert len(calls) == 1
    assert [p.name for p in (cache_dir / "base").iterdir() if p.name.startswith(".tmp")] == []


def test_failed_build_keeps_nothing(cache_dir: Path) -> None:
    def build(tmp: Path) -> None:
        (tmp / "partial").write_text("x")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        cache.build_entry("base", "k", build)
    assert not (cache_dir / "base" / "k").exists()
    assert [p.name for p in (cache_dir / "base").iterdir() if not p.name.endswith(".lock")] == []


def test_losing_builder_uses_the_winner(cache_dir: Path) -> None:
    def build(tmp: Path) -> None:
        winner = cache_dir / "base" / "k"  # another process finished first (e.g. no flock on NFS)
        winner.mkdir()
        (winner / "who").write_text("winner")
        (tmp / "who").write_text("loser")

    entry = cache.build_entry("base", "k", build)
    assert (entry / "who").read_text() == "winner"
    assert sorted(p.name for p in (cache_dir / "base").iterdir()) == [".k.lock", "k"]


def test_concurrent_builders_build_once() -> None:
    calls = []

    def build(tmp: Path) -> None:
        calls.append(1)
        time.sleep(0.2)
        (tmp / "f").write_text("x")

    results: list[Path] = []
    threads = [
        threading.Thread(target=lambda: results.append(cache.build_entry("base", "k", build)))
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1
    assert len(set(results)) == 1 and len(results) == 3


def test_remove_entry(cache_dir: Path) -> None:
    entry = cache.build_entry("sdist", "k", lambda tmp: (tmp / "f").write_text("x"))
    cache.remove_entry("sdist", "k")
    assert not entry.exists()


def test_json_round_trip(cache_dir: Path) -> None:
    assert cache.get_json("baseline", "abc") is None
    path = cache.put_json("baseline", "abc", {"tests": {"t::a": "passed"}, "n": 1})
    assert path == cache_dir / "baseline" / f"abc.{cache.code_identity()}.json"  # keyed by the code too
    assert cache.get_json("baseline", "abc") == {"tests": {"t::a": "passed"}, "n": 1}
    cache.put_json("baseline", "abc", [1, 2])
    assert cache.get_json("baseline", "abc") == [1, 2]
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_get_json_of_corrupt_file_is_none(cache_dir: Path) -> None:
    path = cache.json_path("baseline", "bad")
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert cache.get_json("baseline", "bad") is None


def test_waiting_for_the_cache_lock_says_who_holds_it(cache_dir, capfd):
    import subprocess
    import sys
    import time

    from patchkit import cache

    holder = subprocess.Popen(
        [sys.executable, "-c", "import time, sys\nfrom patchkit import cache\n"
         "with cache.entry_lock('base', 'k'):\n    print('held', flush=True)\n    time.sleep(1.5)\n"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout.readline().strip() == "held"
    started = time.monotonic()
    with cache.entry_lock("base", "k"):
        waited = time.monotonic() - started
    holder.wait(timeout=30)
    err = capfd.readouterr().err
    assert waited > 0.5
    assert (
        f"waiting for the cache lock {cache_dir / 'base' / '.k.lock'} "
        f"(held by pid {holder.pid} (thread MainThread): -c)" in err
    )


@pytest.mark.parametrize("verbose", [0, 1])
def test_a_wait_for_a_lock_this_run_holds_says_this_run(cache_dir, capfd, monkeypatch, verbose):
    """The cold main job's threads wait for each other's builds: the holder is "this run", not the
    process's own pid as if it were somebody else; said only with -v (a thread of this very run
    is not news on a default line)."""
    import os
    import threading

    from patchkit import cache
    from patchkit.ui import console

    monkeypatch.setattr(console, "_verbosity", verbose)

    held, release = threading.Event(), threading.Event()

    def builder() -> None:
        with cache.entry_lock("testenv", "k"):
            held.set()
            release.wait(30)

    thread = threading.Thread(target=builder, name="gate-tests-1")
    thread.start()
    assert held.wait(30)
    threading.Timer(0.5, release.set).start()
    with cache.entry_lock("testenv", "k"):
        pass
    thread.join(30)
    err = capfd.readouterr().err
    if not verbose:
        assert err == ""
        return
    assert "(held by this run: another of its threads (gate-tests-1))" in err
    assert f"pid {os.getpid()}" not in err


def test_a_holder_that_died_is_not_named(cache_dir):
    from patchkit import cache

    lock = cache_dir / "base" / ".k.lock"
    lock.parent.mkdir(parents=True)
    (lock.parent / ".k.lock.owner").write_text("pid 999999999 (thread MainThread): patchkit audit\n")
    assert cache.lock_owner(lock) == "an unknown process"
