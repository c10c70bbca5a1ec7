"""patchkit: a patch-set manager and audit CLI for vLLM."""

__version__ = "0.1.0"
