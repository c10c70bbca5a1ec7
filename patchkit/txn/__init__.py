"""The one transaction mechanism of every command that changes user files (apply, rebase and its
``--continue``/``--abort``, split ``--out``, the edit loop's edit/absorb/refresh/new/drop/move).

- ``journal``: all-or-nothing replacement of a set of files with a write-ahead journal (state
  written and fsynced before the first change, each step idempotent, ``recover`` rolls back a
  pending transaction or finishes a committed one; never touches a file that holds neither image).
- ``transaction.Transaction``: the journal as a context manager (``write``/``remove`` then commit).
- ``transaction.replace_dir_atomically``: a directory patchkit owns whole, replaced in one
  ``renameat2(RENAME_EXCHANGE)`` (old or new, never a mix).
- ``dirswap``: a staged directory swapped for a live one (one ``RENAME_EXCHANGE``) with a durable
  record written first and idempotent follow-ups; ``recover`` finishes or discards (the edit loop).
- ``lock``: one exclusive lock per target; ``nofollow``: reaching a file without following links;
  ``children``: child processes in their own process group, ended with their parent.
"""
