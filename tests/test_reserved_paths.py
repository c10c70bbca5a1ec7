"""A checkout's reserved places (patchkit's state dir, ``.git``) are never written through a patch:
named directly, through a symlink inside the tree, or when the reserved place is itself a link."""

import os

import pytest

from patchkit.apply.paths import safe_path
from patchkit.errors import UserError


def _tree(tmp_path):
    root = tmp_path / "tree"
    (root / ".git").mkdir(parents=True)
    (root / ".patchkit").mkdir()
    (root / "vllm").mkdir()
    (root / "vllm" / "a.py").write_text("x = 1\n")
    return root, (root / ".patchkit", root / ".git")


def test_a_path_inside_a_reserved_place_is_refused_and_others_pass(tmp_path):
    root, reserved = _tree(tmp_path)
    for rel in (".git/config", ".git/hooks/pre-commit", ".patchkit/state.json", ".patchkit"):
        with pytest.raises(UserError, match="which patchkit will not patch|is a directory"):
            safe_path(root, rel, reserved)
    for rel in ("vllm/a.py", "vllm/new.py", ".gitignore", ".github/CODEOWNERS", ".patchkitrc", "git/x.py"):
        assert safe_path(root, rel, reserved) == root / rel


def test_a_symlink_inside_the_tree_into_a_reserved_place_is_refused(tmp_path):
    root, reserved = _tree(tmp_path)
    os.symlink(root / ".git", root / "vllm" / "meta")  # inside root: allowed as a way, not into .git
    with pytest.raises(UserError, match="which patchkit will not patch"):
        safe_path(root, "vllm/meta/config", reserved)


def test_a_reserved_place_that_is_a_link_is_compared_where_it_leads(tmp_path):
    root, _ = _tree(tmp_path)
    (root / "store").mkdir()
    os.rmdir(root / ".patchkit")
    os.symlink(root / "store", root / ".patchkit")  # the state dir lives at root/store
    with pytest.raises(UserError, match="which patchkit will not patch"):
        safe_path(root, "store/state.json", (root / ".patchkit", root / ".git"))
