from __future__ import annotations

import sys
from pathlib import Path

import pytest

from patchkit import cli
from patchkit.diff.mail import parse_trailers
from patchkit.diff.parse import parse_files, parse_text
from patchkit.errors import UserError

ONE = """\
From 1111111111111111111111111111111111111111 Mon Sep 17 00:00:00 2001
From: Alice Example <alice@example.com>
Date: Mon, 3 Feb 2025 10:00:00 +0100
Subject: [PATCH] Fix the parser

Body line.

Signed-off-by: Alice Example <alice@example.com>
---
 x.py | 2 +-
 1 file changed, 1 insertion(+), 1 deletion(-)

diff --git a/x.py b/x.py
index 1234567..89abcde 100644
--- a/x.py
+++ b/x.py
@@ -1,2 +1,2 @@
 keep
-old
+new
--{SP}
2.39.5
""".replace("{SP}", " ")  # the "-- " signature keeps its space


def test_single_commit_mail() -> None:
    [patch] = parse_text(ONE, "one.patch")
    c = patch.commit
    assert (c.sha, c.author, c.email) == ("1" * 40, "Alice Example", "alice@example.com")
    assert c.subject == "Fix the parser"  # [PATCH] tag dropped
    assert c.date == "Mon, 3 Feb 2025 10:00:00 +0100"
    assert c.body.startswith("Body line.") and "1 file changed" not in c.body  # diffstat cut
    assert c.trailer_values("signed-off-by") == ["Alice Example <alice@example.com>"]
    assert c.source == "one.patch:1"
    [fp] = patch.files
    assert (fp.old_path, fp.new_path, fp.old_blob, fp.new_blob) == ("x.py", "x.py", "1234567", "89abcde")
    assert fp.source == "one.patch:13"
    [h] = fp.hunks
    assert (h.old_start, h.old_count, h.new_start, h.new_count) == (1, 2, 1, 2)
    assert h.lines == [" keep", "-old", "+new"]  # "-- " signature not taken as a removed line


def test_many_commits_real_format_patch(fixtures: Path) -> None:
    replay = parse_files([fixtures / "replays" / "tangled.mbox"])
    commits = replay.commits
    assert [c.author for c in commits] == ["Alice Example", "Bob Builder", "陈小明"]
    assert commits[0].subject == "Qwen3X tool fix, SM70 MTP cap and keepalive floor"
    # RFC 2047 subject folded over two header lines, decoded and joined
    assert commits[2].subject == "修复工具解析器默认值"
    assert commits[2].body.startswith("默认开启严格模式，删除旧解析器。")  # 8bit UTF-8 body
    assert commits[2].trailers[0].key == "Co-developed-by"
    assert commits[2].trailers[0].value == "Dana Lee <dana@example.com>"  # folded continuation
    assert commits[2].trailer_values("Signed-off-by") == ["陈小明 <xiaoming@example.com>"]
    assert commits[1].trailers == []  # last paragraph is prose
    assert [c.source for c in commits] == [
        f"{fixtures / 'replays' / 'tangled.mbox'}:{n}" for n in (1, 74, 114)
    ]
    assert [len(p.files) for p in replay.patches] == [4, 2, 3]
    new = replay.patches[1].files[1]
    assert new.is_new and new.new_path == "vllm/v1/core/prefix_cache/lru.py" and new.new_mode == "100644"
    assert new.hunks[0].added == 6
    gone = replay.patches[2].files[1]
    assert gone.is_deleted and gone.old_path == "vllm/tool_parsers/legacy_tool_parser.py"
    assert gone.old_mode == "100644" and gone.removed == 5


def test_trailers() -> None:
    body = (
        "Subject text\n\nprose\n\nReviewed-by: A <a@x>\nCo-developed-by: B\n  <b@x>\nSigned-off-by: B <b@x>"
    )
    assert [(t.key, t.value) for t in parse_trailers(body)] == [
        ("Reviewed-by", "A <a@x>"),
        ("Co-developed-by", "B <b@x>"),
        ("Signed-off-by", "B <b@x>"),
    ]
    # git's rule: a block with a line git writes itself (Signed-off-by) and >= 25 % trailers is one
    assert [t.key for t in parse_trailers("text\n\nSigned-off-by: A <a@x>\nthis is prose")] == [
        "Signed-off-by"
    ]
    assert parse_trailers("text\n\nReviewed-by: A <a@x>\nthis is prose") == []
    assert parse_trailers("only a paragraph of prose") == []
    assert parse_trailers("") == []


def test_plain_git_diff_without_mail_header() -> None:
    text = (
        "diff --git a/x.py b/x.py\nindex 1111111..2222222 100755\n"
        "--- a/x.py\n+++ b/x.py\n@@ -3 +3 @@\n-a\n+b\n"
    )
    [patch] = parse_text(text, "p.diff")
    assert patch.commit is None
    [fp] = patch.files
    assert fp.path == "x.py" and fp.old_mode == fp.new_mode == "100755"
    assert fp.hunks[0].old_count == 1 and fp.hunks[0].lines == ["-a", "+b"]


def test_diff_u_with_timestamps() -> None:
    text = (
        "--- orig/pkg/a.py\t2025-02-03 10:00:00.000000000 +0100\n"
        "+++ new/pkg/a.py\t2025-02-03 10:05:00.000000000 +0100\n"
        "@@ -1,2 +1,3 @@\n x\n+y\n z\n"
    )
    [patch] = parse_text(text, "u.diff")
    [fp] = patch.files
    assert (fp.old_path, fp.new_path) == ("pkg/a.py", "pkg/a.py")  # one component stripped, -p1
    assert fp.hunks[0].lines == [" x", "+y", " z"]


def test_rename_mode_change_and_new_delete_headers() -> None:
    text = """\
diff --git a/old name.py b/new name.py
similarity index 91%
rename from old name.py
rename to new name.py
index 1111111..2222222 100644
--- a/old name.py
+++ b/new name.py
@@ -1 +1 @@
-a
+b
diff --git a/run.sh b/run.sh
old mode 100644
new mode 100755
diff --git a/gone.py b/gone.py
deleted file mode 100644
index 3333333..0000000
--- a/gone.py
+++ /dev/null
@@ -1 +0,0 @@
-x
diff --git a/empty.py b/empty.py
new file mode 100644
index 0000000..e69de29
"""
    rename, mode, gone, empty = parse_text(text, "r.diff")[0].files
    assert (rename.old_path, rename.new_path, rename.similarity) == ("old name.py", "new name.py", 91)
    assert rename.is_rename
    assert (mode.old_mode, mode.new_mode, mode.hunks) == ("100644", "100755", [])
    assert gone.is_deleted and gone.old_blob == "3333333" and gone.new_blob is None
    assert empty.is_new and empty.new_path == "empty.py" and empty.old_blob is None and empty.hunks == []


def test_binary_markers() -> None:
    text = """\
diff --git a/img.png b/img.png
index 1111111..2222222 100644
Binary files a/img.png and b/img.png differ
diff --git a/blob.bin b/blob.bin
new file mode 100644
index 0000000..3333333
GIT binary patch
literal 5
McmZQzWMO6k0001R0RR91

literal 0
HcmV?d00001

diff --git a/t.py b/t.py
--- a/t.py
+++ b/t.py
@@ -1 +1 @@
-a
+b
"""
    png, blob, t = parse_text(text, "b.diff")[0].files
    assert png.binary and blob.binary and blob.is_new
    assert not t.binary and t.hunks[0].lines == ["-a", "+b"]


def test_no_newline_markers_on_both_sides() -> None:
    text = (
        "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n x\n-old\n\\ No newline at end of file\n+new\n"
        "\\ No newline at end of file\n"
    )
    [fp] = parse_text(text, "n.diff")[0].files
    assert fp.hunks[0].lines == [
        " x",
        "-old",
        "\\ No newline at end of file",
        "+new",
        "\\ No newline at end of file",
    ]


def test_quoted_paths_with_spaces_and_unicode() -> None:
    text = (
        'diff --git "a/dir/caf\\303\\251 x.py" "b/dir/caf\\303\\251 x.py"\n'
        '--- "a/dir/caf\\303\\251 x.py"\n+++ "b/dir/caf\\303\\251 x.py"\n@@ -1 +1 @@\n-a\n+b\n'
        "diff --git a/with space.py b/with space.py\n--- a/with space.py\n+++ b/with space.py\n"
        "@@ -1 +1 @@\n-a\n+b\n"
    )
    cafe, spaced = parse_text(text, "q.diff")[0].files
    assert cafe.old_path == cafe.new_path == "dir/café x.py"
    assert spaced.old_path == spaced.new_path == "with space.py"


GOOD_HEAD = "diff --git a/f.py b/f.py\n--- a/f.py\n+++ b/f.py\n"  # lines 1-3


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        (GOOD_HEAD + "@@ -1,3 +1,3 @@\n a\n-b\n", 6, "ends early"),  # truncated hunk
        (GOOD_HEAD + "@@ -1,x +1 @@\n-a\n+b\n", 4, "malformed hunk header"),
        (GOOD_HEAD + "@@ -1,2 +1,2 @@\n a\n?junk\n b\n", 6, "unexpected line inside hunk"),
        (GOOD_HEAD + "@@ -1,2 +1,2 @@\n a\n-b\n+c\n+d\n", 8, "did not count"),  # more lines than counted
        (GOOD_HEAD + "@@ -1 +1 @@\n a\n b\n", 6, "did not count"),
        ("just some prose\nno diff here\n", 1, "no diff found"),
        ("diff --git a/f.py b/f.py\nindex 1111111..2222222 100644\n", 1, "no hunks"),  # header only
    ],
)
def test_malformed_input_names_file_and_line(
    tmp_path: Path, text: str, line: int, words: str, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    path = tmp_path / "bad.diff"
    path.write_text(text)
    with pytest.raises(UserError) as info:
        parse_files([path])
    assert info.value.where == f"{path}:{line}"
    assert words in str(info.value)
    monkeypatch.setattr(sys, "argv", ["patchkit", "split", str(path), "--base", str(tmp_path)])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"patchkit: error: {path}:{line}: ")


def test_malformed_line_numbers_inside_second_mail() -> None:
    text = ONE + "\n" + ONE.replace("@@ -1,2 +1,2 @@", "@@ -1,2 +1,zz @@")
    with pytest.raises(UserError) as info:
        parse_text(text, "m.mbox")
    offset = ONE.count("\n") + 1
    assert info.value.where == f"m.mbox:{offset + 17}"  # its @@ line


GIT_LOG_P = """\
commit 1111111111111111111111111111111111111111 (HEAD -> main)
Author: Ana Lima <ana@example.org>
Date:   Tue Jul 28 23:15:48 2026 +0800

    envs: raise the keep-alive default

    Load balancers idle out after 60 s.

    Co-Authored-By: Bo Chen <bo@example.org>
    Signed-off-by: Ana Lima <ana@example.org>

diff --git a/vllm/envs.py b/vllm/envs.py
index 1234567..89abcde 100644
--- a/vllm/envs.py
+++ b/vllm/envs.py
@@ -1,2 +1,2 @@
 import os
-KEEP_ALIVE = 5
+KEEP_ALIVE = 65

commit 2222222222222222222222222222222222222222
Author: Bo Chen <bo@example.org>
Date:   Wed Jul 29 10:00:00 2026 +0800

    no sign-off here

diff --git a/vllm/x.py b/vllm/x.py
new file mode 100644
index 0000000..1111111
--- /dev/null
+++ b/vllm/x.py
@@ -0,0 +1 @@
+X = 1
"""


def test_git_log_p_entries_keep_authorship_and_trailers() -> None:
    first, second = parse_text(GIT_LOG_P, "log.patch")
    assert first.commit.sha == "1" * 40
    assert (first.commit.author, first.commit.email) == ("Ana Lima", "ana@example.org")
    assert first.commit.subject == "envs: raise the keep-alive default"
    assert [t.key for t in first.commit.trailers] == ["Co-Authored-By", "Signed-off-by"]
    assert [fp.path for fp in first.files] == ["vllm/envs.py"]
    assert first.files[0].hunks[0].lines == [" import os", "-KEEP_ALIVE = 5", "+KEEP_ALIVE = 65"]
    assert second.commit.author == "Bo Chen" and second.commit.trailers == []
    assert second.files[0].is_new and second.files[0].source == "log.patch:27"


def test_subject_keeps_vllm_tags_and_drops_patch_prefixes() -> None:
    mail = (
        "From 1111111111111111111111111111111111111111 Mon Sep 17 00:00:00 2001\n"
        "From: A <a@example.org>\nSubject: [RFC PATCH v2 3/7] [Core][Misc] tidy\n\nbody\n---\n"
        "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"
    )
    [patch] = parse_text(mail, "m.patch")
    assert patch.commit.subject == "[Core][Misc] tidy"


def test_parse_address_is_the_stdlib_parseaddr() -> None:
    """The plain-address fast path (no email.utils import on apply's start-up) gives exactly what
    email.utils.parseaddr gives: random names and addresses, and the forms only the stdlib reads."""
    import email.utils
    import random

    from patchkit.diff.mail import parse_address

    rng = random.Random(7)
    names = "abcXYZ .-'_é中0!#$%&*+=?^`{|}~/\t\"()<>,;:@[]\\"
    local = 'abc.-_+1"() '
    checked = 0
    for _ in range(20000):
        name = "".join(rng.choice(names) for _ in range(rng.randint(0, 12)))
        mail = "".join(rng.choice(local) for _ in range(rng.randint(1, 6))) + "@x.example"
        value = f"{name} <{mail}>" if rng.random() < 0.9 else f"{name}<{mail}>"
        assert parse_address(value) == email.utils.parseaddr(value), value
        checked += 1
    for value in ['"Doe, J." <j@x>', "j@x (J Doe)", "J Doe <j@x>, K <k@x>", "", "=?utf-8?q?J=C3=A9?= <j@x>",
                  "  Ana   María  <a@x>  ", "<@route:j@x>"]:  # fmt: skip
        assert parse_address(value) == email.utils.parseaddr(value), value
    assert checked == 20000


@pytest.mark.parametrize("encoding", ["quoted-printable", "base64"])
def test_an_encoded_mail_body_is_decoded_as_git_am_does(tmp_path, encoding):
    """Mail bodies in quoted-printable or base64 (a mailer's choice) parse to the same commit and
    diff as the plain mail; git am reads them alike."""
    import base64
    import quopri
    import subprocess

    body = ("Fix the caf\u00e9 counter =\n\nSigned-off-by: Ada Dev <ada@example.org>\n---\n"
            "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-old\n+new\n")  # fmt: skip
    raw = body.encode()
    coded = quopri.encodestring(raw) if encoding == "quoted-printable" else base64.encodebytes(raw)
    mail = ("From 1234567890abcdef1234567890abcdef12345678 Mon Sep 17 00:00:00 2001\n"
            "From: Ada Dev <ada@example.org>\nDate: Tue, 1 Dec 2026 10:00:00 +0000\n"
            "Subject: [PATCH] Fix the counter\nMIME-Version: 1.0\n"
            "Content-Type: text/plain; charset=UTF-8\n"
            f"Content-Transfer-Encoding: {encoding}\n\n") + coded.decode()  # fmt: skip
    (patch,) = parse_text(mail, "enc.mbox")
    assert "caf\u00e9 counter =" in patch.commit.body
    signed = [t.value for t in patch.commit.trailers if t.key == "Signed-off-by"]
    assert signed == ["Ada Dev <ada@example.org>"]
    assert [fp.new_path for fp in patch.files] == ["a.txt"]
    assert patch.files[0].hunks[0].lines == ["-old", "+new"]
    repo = tmp_path / "repo"  # the witness: git am applies the same mail to a tree holding "old"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.txt").write_text("old\n")
    who = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@e",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@e",
    }
    env = {**who, "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "-C", str(repo), "add", "a.txt"], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "base"], check=True, env=env)
    (tmp_path / "enc.mbox").write_text(mail)
    subprocess.run(["git", "-C", str(repo), "am", "-q", str(tmp_path / "enc.mbox")], check=True, env=env)
    assert (repo / "a.txt").read_text() == "new\n"
