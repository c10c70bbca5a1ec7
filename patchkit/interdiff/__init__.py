"""What changed between two revisions of a series: per patch unchanged, changed (with the interdiff),
added, dropped or renamed, matched by domain first, then by content (as ``git range-diff`` pairs)."""
