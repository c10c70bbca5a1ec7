"""The edit loop on a small series of ours: edit, absorb (git blame as witness), refresh, new,
drop, move refusals, the journal's recovery, and diff between two revisions."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from patchkit.edit import ops, worktree
from patchkit.errors import CheckFailed
from patchkit.interdiff.compare import compare, load_side
from patchkit.txn import dirswap

ENV = {"GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent"}


def git(cwd: Path, *args: str, **env: str) -> str:
    import os

    full = {**os.environ, **ENV, **env}
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=full
    ).stdout


def commit(repo: Path, who: str, *message: str) -> None:
    name, mail = who.split("|")
    git(repo, "add", "-A")
    args = [a for m in message for a in ("-m", m)]
    git(
        repo,
        "commit",
        "-q",
        *args,
        GIT_AUTHOR_NAME=name,
        GIT_AUTHOR_EMAIL=mail,
        GIT_COMMITTER_NAME=name,
        GIT_COMMITTER_EMAIL=mail,
        GIT_AUTHOR_DATE="1700000000 +0100",
    )


def sub(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))


@pytest.fixture
def loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    base = tmp_path / "base"
    (base / "pkg").mkdir(parents=True)
    for name in "abc":
        body = "".join(f"def {name}{i}():\n    return {i}\n\n\n" for i in range(30))
        (base / "pkg" / f"{name}.py").write_text(f'"""{name}."""\n\n\n' + body)
    (base / "pkg" / "__init__.py").write_text("")
    src = tmp_path / "src"
    src.mkdir()
    git(src, "init", "-q")
    subprocess.run(["cp", "-r", f"{base}/.", str(src)], check=True)
    commit(src, "B|b@x", "base")
    sub(src / "pkg" / "a.py", "return 3\n", "return 3 + 100\n")
    (src / "pkg" / "a.py").write_text((src / "pkg" / "a.py").read_text() + "def helper():\n    return 1\n")
    commit(src, "Alice A|alice@x", "alpha: change a", "Body of alpha.", "Signed-off-by: Alice A <alice@x>")
    sub(src / "pkg" / "b.py", "return 5\n", "return 5 + 200\n")
    commit(src, "Bob B|bob@x", "beta: change b", "Reviewed-by: Carol <carol@x>")
    sub(src / "pkg" / "c.py", "return 7\n", "return 7 + 300\n")
    sub(src / "pkg" / "c.py", '"""c."""\n', '"""c."""\n\nfrom pkg.a import helper\n')
    sub(src / "pkg" / "c.py", "return 29\n", "return helper()\n")
    sub(src / "pkg" / "a.py", "def a4():\n", "def a4():  # gamma\n")
    commit(src, "Carl C|carl@x", "gamma: change c and a")
    series = tmp_path / "series"
    git(src, "format-patch", "-q", "-o", str(series), "HEAD~3")
    (series / "series").write_text("".join(f"{p.name}\n" for p in sorted(series.glob("*.patch"))))
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    (tmp_path / "gitconfig").write_text("[user]\n\tname = Ursula User\n\temail = ursula@x\n")
    work, made = worktree.create(series, tmp_path / "wt", base)
    assert made
    return work


def blame(work: worktree.Work, path: str, needle: str) -> str:
    text = (work.path / path).read_text()
    line = text[: text.index(needle)].count("\n") + 1
    sha = git(work.path, "blame", "--porcelain", "-L", f"{line},{line}", "HEAD", "--", path).split()[0]
    return dict(zip(work.commits, work.names)).get(sha, "base")


def test_edit_makes_one_commit_per_patch_with_the_headers(loop):
    log = git(loop.path, "log", "--format=%an <%ae>|%ad|%s", "--date=raw").splitlines()
    assert log[-1].startswith("patchkit base")
    assert log[:3] == [
        "Carl C <carl@x>|1700000000 +0100|gamma: change c and a",
        "Bob B <bob@x>|1700000000 +0100|beta: change b",
        "Alice A <alice@x>|1700000000 +0100|alpha: change a",
    ]
    again, made = worktree.create(loop.series, loop.path, loop.base_dir)  # re-run: described, not redone
    assert not made and again.commits == loop.commits


def test_rerunning_edit_never_overwrites_uncommitted_work(loop):
    sub(loop.path / "pkg" / "b.py", "return 9\n", "return 9 + 1\n")
    worktree.create(loop.series, loop.path, loop.base_dir)
    assert "return 9 + 1\n" in (loop.path / "pkg" / "b.py").read_text()
    assert any("uncommitted: 1 changed" in line for line in worktree.describe(worktree.load(loop.path)))


def test_absorb_follows_git_blame_and_leaves_the_commuting_edit(loop):
    edits = [
        ("pkg/a.py", "return 3 + 100", "return 3 + 101"),
        ("pkg/b.py", "return 5 + 200", "return 5 + 201"),
        ("pkg/c.py", "return 7 + 300", "return 7 + 301"),
        ("pkg/b.py", "return 15\n", "return 15 + 1\n"),
    ]
    witness = [blame(loop, path, old) for path, old, _ in edits]
    assert witness == [*loop.names, "base"]
    for path, old, new in edits:
        sub(loop.path / path, old, new)
    before = {p.name: p.read_bytes() for p in loop.series.iterdir()}
    dry = ops.absorb(loop.path, dry_run=True)
    assert {p.name: p.read_bytes() for p in loop.series.iterdir()} == before  # dry run: nothing written
    outcome = ops.absorb(loop.path)
    assert [name for _, name in outcome.assigned] == [n for _, n in dry.assigned] == loop.names
    assert [h.where() for h in outcome.left] == ["pkg/b.py:65 (-1/+1)"]
    assert outcome.checks.witness_tree == outcome.checks.head_tree and not outcome.checks.prefix_failures
    text = {n: (loop.series / n).read_text() for n in loop.names}
    assert "+    return 3 + 101" in text[loop.names[0]] and "+    return 7 + 301" in text[loop.names[2]]
    assert (
        "From: Bob B <bob@x>" in text[loop.names[1]] and "Reviewed-by: Carol <carol@x>" in text[loop.names[1]]
    )
    assert "Ursula" not in "".join(text.values())  # no sign-off written for anyone without --signoff
    assert text[loop.names[2]].count("Signed-off-by") == 0
    assert git(loop.path, "status", "--short").split() == ["M", "pkg/b.py"]  # the fourth stays
    repo = loop.path.parent / "am"  # git am takes every rewritten patch
    git(loop.path.parent, "clone", "-q", str(loop.path), str(repo))
    git(repo, "reset", "-q", "--hard", loop.base_commit)
    for name in loop.names:
        git(repo, "am", "-q", str(loop.series / name), GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@x")
    assert git(repo, "rev-parse", "HEAD^{tree}") == git(loop.path, "rev-parse", "HEAD^{tree}")
    record = (
        json.loads((loop.series / "series").parent.joinpath("split.json").read_text())
        if (loop.series / "split.json").exists()
        else None
    )
    assert record is None  # a format-patch series without split.json gets none invented


def test_signoff_adds_only_the_users_own(loop):
    sub(loop.path / "pkg" / "b.py", "return 5 + 200", "return 5 + 202")
    ops.refresh(loop.path, "0002", signoff=True)
    text = (loop.series / loop.names[1]).read_text()
    assert "Signed-off-by: Ursula User <ursula@x>" in text and "From: Bob B <bob@x>" in text
    assert (loop.series / loop.names[0]).read_text().count("Signed-off-by") == 1  # Alice's own, kept


def test_refresh_refused_when_a_later_patch_touches_the_lines(loop):
    sub(loop.path / "pkg" / "c.py", "return 7 + 300", "return 7 + 303")
    before = dirswap.digest(loop.series)
    with pytest.raises(
        CheckFailed, match=r"refresh 0001-alpha-change-a.patch refused: .*pkg/c.py:3[0-9] .*0003-gamma"
    ):
        ops.refresh(loop.path, "0001")
    assert dirswap.digest(loop.series) == before


def test_drop_refused_while_a_later_patch_needs_it(loop):
    with pytest.raises(
        CheckFailed, match=r"drop 0001-alpha-change-a.patch refused: 0003-gamma-change-c-and-a.patch"
    ):
        ops.drop(loop.path, "1")
    ops.drop(loop.path, "beta-change-b")  # nothing needs it
    assert (loop.series / "series").read_text().split() == [loop.names[0], loop.names[2]]
    assert "return 5\n" in (loop.path / "pkg" / "b.py").read_text()


def test_move_refused_when_a_prefix_breaks(loop, tmp_path):
    with pytest.raises(
        CheckFailed, match=r"move 0003-gamma-change-c-and-a.patch after the base refused: prefix: .*helper"
    ):
        ops.move(loop.path, "3", "base")
    ops.move(loop.path, "2", "base")
    assert (loop.series / "series").read_text().split()[0] == loop.names[1]


def test_new_makes_a_patch_of_commuting_changes(loop):
    sub(loop.path / "pkg" / "b.py", "return 15\n", "return 15 + 1\n")
    ops.new(loop.path, "extra", after="0002")
    assert (loop.series / "series").read_text().split()[2] == "0003-extra.patch"
    assert "From: Ursula User <ursula@x>" in (loop.series / "0003-extra.patch").read_text()


def test_a_crash_after_the_swap_is_finished_and_one_before_is_undone(loop, monkeypatch):
    sub(loop.path / "pkg" / "a.py", "return 3 + 100", "return 3 + 104")
    old = dirswap.digest(loop.series)
    monkeypatch.setattr(worktree, "_forward", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        ops.absorb(loop.path)
    assert dirswap.pending(worktree.state_dir(loop.path)) is not None and dirswap.digest(loop.series) != old
    monkeypatch.undo()
    assert "finished" in worktree.recover(loop.path)
    assert "+    return 3 + 104" in (loop.series / loop.names[0]).read_text()
    assert git(loop.path, "status", "--short") == ""
    sub(loop.path / "pkg" / "a.py", "return 3 + 104", "return 3 + 105")
    new = dirswap.digest(loop.series)
    monkeypatch.setattr(dirswap, "exchange", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        ops.absorb(loop.path)
    monkeypatch.undo()
    assert "undid" in worktree.recover(loop.path)
    assert dirswap.digest(loop.series) == new and "return 3 + 105" in (loop.path / "pkg" / "a.py").read_text()


def test_diff_between_two_revisions(loop, tmp_path):
    old = tmp_path / "old"
    subprocess.run(["cp", "-r", str(loop.series), str(old)], check=True)
    sub(loop.path / "pkg" / "b.py", "return 5 + 200", "return 5 + 209")
    ops.absorb(loop.path)
    ops.drop(loop.path, "0002")
    rows = {r.old or r.new: r.status for r in compare(load_side(str(old)), load_side(str(loop.series)))}
    assert rows == {loop.names[0]: "unchanged", loop.names[1]: "dropped", loop.names[2]: "unchanged"}


def test_audit_since_shows_what_changed_per_patch_and_in_the_lead(loop, tmp_path):
    from typer.testing import CliRunner

    from patchkit.cli import app

    old = tmp_path / "old.json"
    args = ["audit", str(loop.series), "--base", str(loop.base_dir), "--gates", "apply"]
    assert CliRunner().invoke(app, [*args, "--json", str(old)]).exit_code == 0
    sub(loop.path / "pkg" / "b.py", "return 5 + 200", "return 5 + 205")
    ops.absorb(loop.path)
    md, html, new = tmp_path / "new.md", tmp_path / "new.html", tmp_path / "new.json"
    ran = CliRunner().invoke(
        app, [*args, "--since", str(old), "--md", str(md), "--html", str(html), "--json", str(new)]
    )
    assert ran.exit_code == 0, ran.output
    since = json.loads(new.read_text())["since"]
    assert {k: v["status"] for k, v in since["patches"].items()} == {
        loop.names[0]: "unchanged",
        loop.names[1]: "changed",
        loop.names[2]: "unchanged",
    }
    assert "Since the last audit" in md.read_text() and "unchanged 2, changed 1" in md.read_text()
    assert "Since the last audit: changed" in html.read_text()
    zh = tmp_path / "zh.md"
    CliRunner().invoke(app, [*args, "--since", str(old), "--md", str(zh), "--lang", "zh"])
    assert "自上次审计" in zh.read_text()


def test_diff_matches_by_domain_then_by_content():
    from patchkit.interdiff.compare import Side

    body = ["diff --git a/x b/x", "--- a/x", "+++ b/x", "@@", "-old", "+new", " ctx"]
    other = ["diff --git a/y b/y", "--- a/y", "+++ b/y", "@@", "+only"]
    old = [Side("0001-a.patch", "a", "a", body), Side("0002-b.patch", "b", "b", other)]
    changed_a = Side("0001-a.patch", "a", "a", [*body[:5], "+newer", " ctx"])
    new = [
        changed_a,
        Side("0002-c.patch", "c", "c", other),
        Side("0003-d.patch", "d", "d", ["diff --git a/z b/z", "+z"]),
    ]
    rows = {(r.old, r.new): r.status for r in compare(old, new)}
    assert rows == {("0001-a.patch", "0001-a.patch"): "changed", ("0002-b.patch", "0002-c.patch"): "renamed",
                    (None, "0003-d.patch"): "added"}  # fmt: skip
    changed = next(r for r in compare(old, new) if r.status == "changed")
    assert "-+new" in changed.interdiff and "++newer" in changed.interdiff


def test_absorb_recomputes_the_needs_and_records_what_it_proved(tmp_path, monkeypatch):
    """A hunk over lines of two patches goes to the later one, which then applies only on the
    earlier: split.json's depends_on says so again (git apply --check is the witness), and its proof
    is this series' (base + series == the work tree), the split's own kept beside it."""
    from typer.testing import CliRunner

    from patchkit.cli import app

    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))
    (tmp_path / "gitconfig").write_text("[user]\n\tname = Ursula User\n\temail = ursula@x\n")
    lines = [f"V{i} = {i}\n" for i in range(30)]
    final = list(lines)
    final[10] = "V10 = 100  # USE\n"  # early
    final[14] = "V14 = 140\n"  # late
    for side, text in (("a", lines), ("b", final)):
        (tmp_path / side / "pkg").mkdir(parents=True)
        (tmp_path / side / "pkg" / "__init__.py").write_text("")
        (tmp_path / side / "pkg" / "m.py").write_text("".join(text))
    diff = subprocess.run(["git", "diff", "--no-index", "a", "b"], cwd=tmp_path, capture_output=True).stdout
    (tmp_path / "r.diff").write_bytes(diff.replace(b"a/a/", b"a/").replace(b"b/b/", b"b/"))
    (tmp_path / "rules.toml").write_text(
        "[[domain]]\nname = \"early\"\n  [[domain.match]]\n  paths = ['pkg/**']\n  patterns = ['USE']\n\n"
        "[[domain]]\nname = \"late\"\npaths = ['pkg/**']\n"
    )
    series, base = tmp_path / "series", tmp_path / "a"
    args = ["split", str(tmp_path / "r.diff"), "--base", str(base), "--rules", str(tmp_path / "rules.toml")]
    result = CliRunner().invoke(app, [*args, "--out", str(series), "--author", "Ada Dev <ada@x>"])
    assert result.exit_code == 0, result.output
    before = {
        p["filename"]: p["depends_on"] for p in json.loads((series / "split.json").read_text())["patches"]
    }
    assert before == {"0001-early.patch": [], "0002-late.patch": []}
    work, _ = worktree.create(series, tmp_path / "wt", base)
    text = (work.path / "pkg" / "m.py").read_text()
    for i in range(10, 15):  # one hunk over early's line 10 and late's line 14
        text = text.replace(f"V{i} = ", f"V{i} = 1 + ", 1)
    (work.path / "pkg" / "m.py").write_text(text)
    outcome = ops.absorb(work.path)
    assert [name for _, name in outcome.assigned] == ["0002-late.patch"]
    record = json.loads((series / "split.json").read_text())
    after = {p["filename"]: p["depends_on"] for p in record["patches"]}
    assert after == {"0001-early.patch": [], "0002-late.patch": ["early"]}
    # the witness: the rewritten late patch no longer applies to the base alone
    alone = subprocess.run(
        ["git", "apply", "--check", str(series / "0002-late.patch")], cwd=base, capture_output=True
    )
    assert alone.returncode != 0
    proof = record["proof"]
    assert proof["of"] == "patchkit absorb" and proof["ok"] is True
    assert proof["git_witness"]["series_tree"] == proof["git_witness"]["work_tree_commit_tree"]
    assert proof["split_proof"]["ok"] is True and "series_tree_sha256" in proof["split_proof"]
