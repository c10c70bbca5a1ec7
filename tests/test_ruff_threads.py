"""The split's ruff and the audit's gates find ruff from threads: before Python 3.12 ``sysconfig``
fills its variables lazily and not thread-safely, and a second thread could see them half-filled
(``get_config_var("EXE")`` None, so ruff's ``find_ruff_bin`` raised TypeError and crashed an
``audit --gates apply,imports`` of a real series). Every finder takes one lock and fills the
variables under it."""

from __future__ import annotations

import sysconfig
import threading
import time

import pytest

from patchkit.analysis import undefined


def test_two_threads_find_ruff_while_sysconfig_fills_its_variables(monkeypatch):
    if not hasattr(sysconfig, "_init_posix") or not hasattr(sysconfig, "_CONFIG_VARS"):
        pytest.fail("this Python's sysconfig has no _init_posix/_CONFIG_VARS: rewrite the race for it")
    original = sysconfig._init_posix

    def slow_init(variables):  # widen the window in which the dict exists but is still empty
        time.sleep(0.3)
        original(variables)

    monkeypatch.setattr(sysconfig, "_init_posix", slow_init)
    monkeypatch.setattr(sysconfig, "_CONFIG_VARS", None)
    if hasattr(sysconfig, "_CONFIG_VARS_INITIALIZED"):  # 3.12+: its own guard
        monkeypatch.setattr(sysconfig, "_CONFIG_VARS_INITIALIZED", False)
    found: list[object] = []

    def find() -> None:
        try:
            found.append(undefined.dependency_ruff())
        except Exception as exc:  # what the unlocked finder raised
            found.append(exc)

    threads = [threading.Thread(target=find) for _ in range(3)]
    for thread in threads:
        thread.start()
        time.sleep(0.05)
    for thread in threads:
        thread.join()
    assert len(found) == 3
    assert not [f for f in found if isinstance(f, Exception)], found
    assert len(set(found)) == 1 and found[0] is not None  # patchkit's own ruff dependency, every time
