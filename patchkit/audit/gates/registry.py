"""Every audit gate, in the order a patch meets them.

A new gate: one module exporting ``GATE``, one line here."""

from __future__ import annotations

from patchkit.audit.gates import Gate, apply, dco, imports, lint, ruff, tests

REGISTRY: dict[str, Gate] = {
    gate.name: gate
    for gate in (
        apply.GATE,
        ruff.GATE,
        lint.GATE,
        imports.GATE,
        dco.GATE,
        tests.GATE,
    )
}
GATES = tuple(REGISTRY)
