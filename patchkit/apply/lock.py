"""Moved to ``patchkit.txn.lock`` (the one transaction mechanism); this name stays an alias of it."""

import sys

from patchkit.txn import lock

sys.modules[__name__] = lock
