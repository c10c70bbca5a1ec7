"""patchkit: a patch-set manager and audit CLI for vLLM."""

# the distribution is "vllm-patchkit" (pyproject.toml); the package and the command are "patchkit"
DISTRIBUTION = "vllm-patchkit"
__version__ = "0.1.0"
