"""Moved to ``patchkit.txn.nofollow`` (the one transaction mechanism); this name stays an alias of it."""

import sys

from patchkit.txn import nofollow

sys.modules[__name__] = nofollow
