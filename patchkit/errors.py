"""One place that turns a user-caused problem into one clear line and an exit code."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1  # a gate or a verification failed
EXIT_USAGE = 2  # bad input or usage
EXIT_INCOMPLETE = 3  # an audit where a requested gate could not run (and nothing failed)
EXIT_BUG = 4  # patchkit itself failed: an unexpected exception (cli/crash.py), never a verdict


class UserError(Exception):
    """Bad input the user can fix: printed as one line, exit 2. ``where`` is 'file:line' when known."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, where: str | None = None) -> None:
        super().__init__(message)
        self.where = where

    def line(self) -> str:
        return f"{self.where}: {self}" if self.where else str(self)


class CheckFailed(UserError):
    """A verification or gate failed (preimage mismatch, lossless proof): one line, exit 1."""

    exit_code = EXIT_FAILED
