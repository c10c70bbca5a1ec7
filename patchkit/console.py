"""The console moved to ``patchkit.ui.console``; this name stays for the modules that import it."""

from patchkit.ui.console import rich_console, set_verbosity, verbosity  # noqa: F401
