"""Undefined names in tree states, by ruff's own rules (F821, F822, F823; F405 in a file with a star
import), not by patchkit's reading;
and in the same pass what only the compiler refuses (F701, F702, F704, F706: ``return`` outside a
function), since ``ast.parse`` takes it.

A state is the files it changed (``path -> content``). Every distinct (path, content) of all the
states asked about is written once into one scratch directory and one ``ruff check --isolated
--select F821,F822,F823`` process reads them all: checking the nine states of a series costs one
process, not nine. The findings come back as ``static.Problem``\\ s of kind ``undefined`` (``name``
the undefined name, ``target`` ruff's code), so they compare across states like the static ones.

The ruff is the one patchkit depends on (the ``ruff`` package's executable), else a ``ruff`` on
PATH; without either ``run`` raises ``NoRuff`` and the callers say the check could not run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sysconfig
import tempfile
import threading
from collections.abc import Callable
from functools import cache

from patchkit.analysis.static import Problem
from patchkit.proc import run_process

# F405: in a file with a star import ruff reports a read of a name the file does not bind as F405,
# not F821 (the star may provide it); what the star does provide is on the base and in the final
# state too, so it is not the split's
CODES = ("F821", "F822", "F823", "F405")
# what ``ast.parse`` lets through and ``compile()`` refuses: break/continue outside a loop, yield
# or return outside a function; reported as kind ``syntax`` (the state does not compile)
COMPILE = {"F701": "'break' outside loop", "F702": "'continue' not properly in loop",
           "F704": "'yield' outside function", "F706": "'return' outside function"}  # fmt: skip
Files = dict[str, "bytes | None"]
_MEMO: dict[tuple[str, bytes], list[Problem]] = {}


class NoRuff(RuntimeError):
    """No ruff could be run here: the undefined-name check could not run."""


_FIND_LOCK = threading.Lock()


def dependency_ruff() -> str | None:
    """The executable of the ``ruff`` package installed beside patchkit (its own dependency), or
    None. The split's checks and the audit's gates run in threads, and before Python 3.12
    ``sysconfig`` fills its variables lazily and not thread-safely: a second caller can see the dict
    half-filled (``get_config_var("EXE")`` is None and ``find_ruff_bin`` raises TypeError). One lock
    for every caller, and the variables filled under it first."""
    try:
        from ruff.__main__ import find_ruff_bin  # type: ignore[import-not-found]
    except ImportError:
        return None
    with _FIND_LOCK:
        sysconfig.get_config_vars()
        try:
            found = find_ruff_bin()
        except FileNotFoundError:
            return None
    return str(found) if found and os.access(found, os.X_OK) else None


@cache
def ruff_command() -> tuple[str, ...] | None:
    found = dependency_ruff() or shutil.which("ruff")
    return (found,) if found and os.access(found, os.X_OK) else None


def command() -> list[str]:
    """The argv run (the directory last), for a witness record."""
    exe = ruff_command()
    return [*(exe or ("ruff",)), "check", "--isolated", "--no-cache", "--exit-zero", "--output-format",
            "json", "--select", ",".join((*CODES, *COMPILE)), "{dir}"]  # fmt: skip


def check(states: list[Files]) -> list[list[Problem]]:
    """Each state's undefined-name problems in its Python files (one ruff process for all)."""
    todo = {(p, d) for files in states for p, d in files.items()
            if p.endswith(".py") and d is not None and (p, d) not in _MEMO}  # fmt: skip
    if todo:
        _run(sorted(todo))
    return [[q for p, d in sorted(files.items()) if p.endswith(".py") and d is not None
             for q in _MEMO[(p, d)]] for files in states]  # fmt: skip


def check_async(states: list[Files]) -> Callable[[], list[list[Problem]]]:
    """``check`` with its ruff process started now, in a thread (the process runs on another core
    while the caller does its own checks); the returned function waits and answers as ``check``
    (``NoRuff`` included). Call it before any other ``check``."""
    todo = sorted({(p, d) for files in states for p, d in files.items()
                   if p.endswith(".py") and d is not None and (p, d) not in _MEMO})  # fmt: skip
    failed: list[BaseException] = []

    def work() -> None:
        try:
            _run(todo)
        except BaseException as exc:  # answered by wait(), in the caller's thread
            failed.append(exc)

    thread = threading.Thread(target=work, name="patchkit-ruff", daemon=True) if todo else None
    if thread is not None:
        thread.start()

    def wait() -> list[list[Problem]]:
        if thread is not None:
            thread.join()
        if failed:
            raise failed[0]
        return check(states)

    return wait


def check_one(files: Files) -> list[Problem]:
    return check([files])[0]


def _run(todo: list[tuple[str, bytes]]) -> None:
    exe = ruff_command()
    if exe is None:
        raise NoRuff("no ruff: neither patchkit's ruff dependency nor a ruff on PATH")
    if len(_MEMO) > 20000:
        _MEMO.clear()
    with tempfile.TemporaryDirectory(prefix="patchkit-undefined-") as tmp:
        where: dict[str, tuple[str, bytes]] = {}
        found: dict[tuple[str, bytes], list[Problem]] = {}
        for i, (path, data) in enumerate(todo):
            name = os.path.join(tmp, str(i), path)
            os.makedirs(os.path.dirname(name), exist_ok=True)
            with open(name, "wb") as handle:
                handle.write(data)
            where[os.path.realpath(name)] = (path, data)
            found[(path, data)] = []
        argv = [*command()[:-1], tmp]
        proc = run_process(argv, text=True, timeout=600)
        if proc.returncode != 0:
            raise NoRuff((proc.stderr.strip().splitlines() or ["ruff failed"])[-1])
        for finding in json.loads(proc.stdout or "[]"):
            key = where.get(os.path.realpath(finding.get("filename", "")))
            code = finding.get("code")
            if key is None or (code not in CODES and code not in COMPILE):
                continue
            if code in COMPILE:
                line = (finding.get("location") or {}).get("row", 0)
                found[key].append(Problem(key[0], line, "syntax", f"line {line}: {COMPILE[code]}", code))
                continue
            name = re.search(r"`([^`]+)`", finding.get("message", ""))
            line = (finding.get("location") or {}).get("row", 0)
            found[key].append(
                Problem(key[0], line, "undefined", name.group(1) if name else "?", finding["code"])
            )
        _MEMO.update(found)  # only what ruff answered: a failed run leaves no entry behind


def text(problem: Problem) -> str:
    return f"{problem.file}:{problem.line}: name {problem.name!r} is undefined ({problem.target})"


__all__ = [
    "CODES",
    "NoRuff",
    "check",
    "check_async",
    "check_one",
    "command",
    "dependency_ruff",
    "ruff_command",
    "text",
]
