"""Wheels as release artifacts: the pinned wheel, patched by the series, rebuilt and verified.

``source`` fetches the pinned wheel for this platform through the package index (cached by
sha256); ``zipio`` reads a wheel's members and writes a zip byte for byte the same on every run;
``naming`` holds the PEP 440 / wheel-name rules and the METADATA and RECORD texts; ``provenance``
is the record patchkit puts in the ``.dist-info``; ``build`` applies the series (``apply.plan``, the
site-packages rules) and writes the new wheel; ``verify`` checks one; ``installed`` checks an
installed one for ``patchkit status``.

Named ``wheels`` (not ``wheel``, which is the PyPI package whose ``wheel unpack`` is the witness;
not ``release``, since nothing here uploads, tags or signs a release).
"""
