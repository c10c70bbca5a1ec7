"""What the pinned vLLM says about itself: mergify labels, CODEOWNERS, buildkite CI steps.

Readers at the base layer (they read files of a base tree, nothing above it). Each is tolerant of
the variants these files had across vLLM releases; a base without them yields an empty result and
``UpstreamMeta.missing`` names what was absent, so callers fall back to the shipped rules and say so.
"""
