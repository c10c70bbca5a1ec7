"""``patchkit checkout``: prepare the pinned base and print its path."""

from __future__ import annotations

from pathlib import Path

from patchkit.errors import EXIT_OK, UserError


def run(pin_file: Path | None, dest: Path | None) -> int:
    from patchkit.base.pin import checkout
    from patchkit.config import find_project_config, load_pin

    config = pin_file or find_project_config()
    if config is None:
        raise UserError("no pin: pass --config FILE (no patchkit.toml found from here up)")
    print(checkout(load_pin(config), dest))
    return EXIT_OK
