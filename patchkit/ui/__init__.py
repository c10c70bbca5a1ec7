"""What patchkit shows on a terminal, in one place: the console (verbosity, colour, widths),
progress, and one summary per record kind, shared by every command that prints that record.

``console`` is a base module (layer 0: any package may ask for the verbosity or a console); the
summaries read the catalogues of ``report/`` and sit above it.
"""
