"""The names the commands and patchkit.toml accept alike, one list each: the CLI's choices and the
config reader's (tests/test_cli_conventions.py checks them against the gate registry, the report
catalogues and apply's targets). No imports: ``patchkit --help`` loads it."""

# every gate audit/gates/registry.py has, in its order: [audit] gates / optional, --gates / --optional-gates
GATE_NAMES = ("apply", "ruff", "lint", "imports", "dco", "tests")
SELECTIONS = ("upstream", "affected")  # [audit] select / --select: the tests gate's selection
LANGS = ("en", "zh")
TARGETS = ("checkout", "site-packages")
COLOR_MODES = ("auto", "always", "never")  # --color, as git and ruff spell it (patchkit/ui/console.py)
