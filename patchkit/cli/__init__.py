"""The command line: ``main`` (the ``patchkit`` command) and ``app``, the Typer app with every verb.

``from patchkit.cli import app`` defines every verb; ``main`` defines only the one it runs
(``cli/root.py``). The verbs are in ``series``, ``target``, ``setup``, ``audit``, ``edit`` and ``ci``;
the options they share in ``options``; the habits every verb has in ``conventions``; the crash
handler in ``crash``."""

from patchkit.choices import GATE_NAMES, LANGS, TARGETS  # noqa: F401 (the names the CLI offers)
from patchkit.cli.root import main  # noqa: F401


def __getattr__(name: str):
    if name == "app":
        from patchkit.cli.root import app, register

        register(None)
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
