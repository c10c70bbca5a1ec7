"""Mutation fuzzing of every input parser: each input parses or raises ``UserError``.

``python -m tests.fuzz --inputs 1000000`` is the long profile; tests/test_hardening_fuzz.py runs a
CI-sized slice of the same engine and replays every case kept in ``corpus/``.
"""
