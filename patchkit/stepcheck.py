"""Does every patch of a split leave Python files that still parse?

The proof checks the end state only. A split that is lossless can still cut a change so that a
patch applied without the later ones leaves a file that does not compile; a reviewer, a bisect or
an audit of that patch alone then meets a broken tree. This names each such (patch, file, line).
"""

from __future__ import annotations

import warnings

Side = tuple[bytes | None, str | None]


def unparsable_steps(
    steps: list[tuple[str, Side, Side]], order: list[str], final: dict[str, bytes | None]
) -> list[str]:
    """'0001-tool-parser leaves vllm/envs.py unparsable at line 1140: ...' for each broken step.

    ``steps`` are (``NNNN/path``, before, after) as split builds them; ``final`` is each file
    after the whole replay. Only intermediate states are the split's doing: a step that leaves the
    file as the replay does is not checked, and one whose file did not parse before is not blamed.
    """
    problems = []
    for key, (before, _), (after, _) in steps:
        number, _, path = key.partition("/")
        if not path.endswith(".py") or after is None or after == final.get(path):
            continue
        error = _syntax_error(after, path)
        if error and (before is None or _syntax_error(before, path) is None):
            k = int(number)
            problems.append(f"{k + 1:04d}-{order[k]} leaves {path} unparsable at line {error}")
    return problems


def _syntax_error(source: bytes, path: str) -> str | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences and the like are not ours
            compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        return f"{exc.lineno}: {exc.msg}"
    except ValueError as exc:  # null bytes
        return f"?: {exc}"
    return None
