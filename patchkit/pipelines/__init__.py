"""CI pipelines for the audit on existing engines (``patchkit ci``): Buildkite, vLLM's own CI."""
