"""Does every patch of a split leave Python files that still parse?

The proof checks the end state only. A split that is lossless can still cut a change so that a
patch applied without the later ones leaves a file that does not compile; a reviewer, a bisect or
an audit of that patch alone then meets a broken tree. This names each such (patch, file, line).

Compiling the intermediate states of a large shared file (vLLM's ``envs.py`` is 4,000 lines) is
most of a split's CPU time, and nothing else in the split needs its answer until the series record
is written. ``start`` therefore runs the check in a forked child on the other core while the
caller renders, writes and proves the series; ``PendingCheck.result`` collects it. Where there is no
``fork``, or the child fails in any way, the parent compiles what the child did not report: the
check is never skipped.
"""

from __future__ import annotations

import json
import os
import signal
import warnings

Side = tuple[bytes | None, str | None]
Step = tuple[str, Side, Side]


def unparsable_steps(steps: list[Step], order: list[str], final: dict[str, bytes | None]) -> list[str]:
    """'0001-tool-parser leaves vllm/envs.py unparsable at line 1140: ...' for each broken step.

    ``steps`` are (``NNNN/path``, before, after) as split builds them; ``final`` is each file
    after the whole replay. Only intermediate states are the split's doing: a step that leaves the
    file as the replay does is not checked, and one whose file did not parse before is not blamed.
    """
    todo = _to_check(steps, final)
    errors = [_syntax_error(after, key.partition("/")[2]) for key, _, (after, _) in todo]
    return _problems(todo, order, errors)


def _to_check(
    steps: list[Step], final: dict[str, bytes | None], parsed: set[bytes] = frozenset()
) -> list[Step]:
    out = []
    for step in steps:
        key, _, (after, _) = step
        path = key.partition("/")[2]
        if path.endswith(".py") and after is not None and after != final.get(path) and after not in parsed:
            out.append(step)
    return out


class PendingCheck:
    """The answer of ``unparsable_steps``, computed now or shared with a child process.

    The child compiles the states largest first and reports each as it finishes; ``result`` takes
    the smallest ones itself until the two meet, so the last file is never left to one process.
    """

    def __init__(self, steps: list[Step], order: list[str], final: dict[str, bytes | None],
                 pid: int | None = None, fd: int | None = None, done: list[str] | None = None):  # fmt: skip
        self._steps, self._order, self._final = steps, order, final
        self._pid, self._fd, self._done = pid, fd, done

    def result(self) -> list[str]:
        if self._done is None:
            errors = self._share()
            self._done = _problems(self._steps, self._order, errors)
        return self._done

    def _share(self) -> list[str | None]:
        """The after-state error of every step, from the child's reports and the parent's own work."""
        todo = _largest_first(self._steps)
        errors: dict[int, str | None] = {}
        buffer = b""
        child_alive = True
        try:
            while len(errors) < len(todo):
                if child_alive:
                    chunk, child_alive = _read(self._fd, block=False)
                    buffer = _take_reports(buffer + chunk, errors, len(todo))
                left = [i for i in todo if i not in errors]
                if not left:
                    break
                if child_alive and len(left) == 1:  # the child is on it: wait for its report
                    chunk, child_alive = _read(self._fd, block=True)
                    buffer = _take_reports(buffer + chunk, errors, len(todo))
                    continue
                index = left[-1]  # the smallest the child has not reported
                key, _, (after, _) = self._steps[index]
                errors[index] = _syntax_error(after, key.partition("/")[2])
        finally:
            os.close(self._fd)
            try:
                os.kill(self._pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(self._pid, 0)
        return [errors[i] for i in range(len(self._steps))]


def _largest_first(steps: list[Step]) -> list[int]:
    return sorted(range(len(steps)), key=lambda i: -len(steps[i][2][0] or b""))


def _read(fd: int, block: bool) -> tuple[bytes, bool]:
    """What the child has written so far, and whether it may write more."""
    os.set_blocking(fd, block)
    chunks = []
    try:
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b"".join(chunks), False
            chunks.append(chunk)
            if block:
                return b"".join(chunks), True
    except BlockingIOError:
        return b"".join(chunks), True


def _take_reports(buffer: bytes, errors: dict[int, str | None], count: int) -> bytes:
    """Record every complete report line ('index<TAB>json error or null'); keep the rest."""
    *lines, rest = buffer.split(b"\n")
    for line in lines:
        try:
            index_text, _, payload = line.partition(b"\t")
            index, error = int(index_text), json.loads(payload)
        except ValueError:
            continue  # a torn or foreign line: that step is computed here instead
        if 0 <= index < count and (error is None or isinstance(error, str)):
            errors[index] = error
    return rest


def _problems(steps: list[Step], order: list[str], errors: list[str | None]) -> list[str]:
    problems = []
    for (key, (before, _), _), error in zip(steps, errors):
        number, _, path = key.partition("/")
        if error and (before is None or _syntax_error(before, path) is None):
            k = int(number)
            problems.append(f"{k + 1:04d}-{order[k]} leaves {path} unparsable at line {error}")
    return problems


def start(steps: list[Step], order: list[str], final: dict[str, bytes | None],
          parsed: set[bytes] = frozenset()) -> PendingCheck:  # fmt: skip
    """Begin ``unparsable_steps``; with a forked child when there is anything to parse
    (``parsed``: states known to parse already, e.g. from the name analysis, are skipped)."""
    todo = _to_check(steps, final, parsed)
    if not todo:
        return PendingCheck(steps, order, final, done=[])
    if not hasattr(os, "fork") or os.environ.get("PATCHKIT_NO_FORK"):
        return PendingCheck(steps, order, final, done=unparsable_steps(todo, order, final))
    read_fd, write_fd = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        return PendingCheck(steps, order, final, done=unparsable_steps(todo, order, final))
    if pid == 0:  # the child: report each step, leave without running the parent's cleanups
        code = 1
        try:
            os.close(read_fd)
            for index in _largest_first(todo):
                key, _, (after, _) = todo[index]
                error = _syntax_error(after, key.partition("/")[2])
                _write_all(write_fd, b"%d\t%s\n" % (index, json.dumps(error).encode()))
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    return PendingCheck(todo, order, final, pid=pid, fd=read_fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _syntax_error(source: bytes, path: str) -> str | None:
    """'line: message' when the source does not compile, else None.

    Real ``compile()``: ``symtable`` and ``ast.parse`` let through what only the compiler refuses
    (``return`` or ``yield`` outside a function, ``await`` outside async, a misplaced
    ``nonlocal``), and a cut can leave exactly that (a body without its ``def``)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences and the like are not ours
            compile(source.decode("utf-8", errors="surrogateescape"), path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        return f"{exc.lineno}: {exc.msg}"
    except (ValueError, UnicodeError) as exc:  # null bytes, lone surrogates
        return f"?: {exc}"
    return None
