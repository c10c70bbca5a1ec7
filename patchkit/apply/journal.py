"""Moved to ``patchkit.txn.journal`` (the one transaction mechanism); this name stays an alias of it."""

import sys

from patchkit.txn import journal

sys.modules[__name__] = journal
