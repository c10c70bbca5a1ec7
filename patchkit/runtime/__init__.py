"""``patchkit runtime``: a vLLM plugin's monkeypatches, resolved against a pinned vLLM.

A plugin (``vllm.general_plugins`` / ``vllm.platform_plugins``) replaces vLLM functions and classes at
run time. ``sites`` finds where it does (attribute assignment, ``setattr``, captured originals, class
swaps, registry decorators); ``resolve`` finds each target in a base tree without importing it;
``signature`` compares the original with the replacement; ``since`` compares the original between
two pins (with the upstream diff); ``registry`` reads the plugin's own notes on each patch;
``witness`` imports the targets in a real interpreter; ``engine`` makes the audit record of it all.
"""
