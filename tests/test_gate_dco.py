import pytest
from fixtures.audit.builder import file_diff, patch_text

from patchkit.audit.gates import PatchUnderAudit
from patchkit.audit.gates.dco import check_commit, dco_gate, identity
from patchkit.diff.mail import parse_trailers
from patchkit.diff.model import Commit, Trailer
from patchkit.diff.parse import parse_text
from patchkit.report.i18n import message_text
from patchkit.report.words import gate_summary


def _commit(trailers, author="Ada Dev", email="Ada@Example.org"):
    return Commit("abc123", author, email, None, "subject", trailers=trailers)


def _why(commit):
    ok, message = check_commit(commit)
    return ok, message_text(message)


def test_identity_normalises():
    assert identity("Ada  Dev <ADA@example.ORG>") == ("Ada Dev", "ada@example.org")
    assert identity("no address") is None


def test_matching_sign_off_case_insensitive_email():
    ok, reason = check_commit(_commit([Trailer("Signed-off-by", "Ada Dev <ada@EXAMPLE.org>")]))
    assert ok, reason


def test_missing_and_mismatched_sign_off():
    assert _why(_commit([]))[1].startswith("no Signed-off-by")
    ok, reason = _why(_commit([Trailer("Signed-off-by", "Bob <bob@example.org>")]))
    assert not ok and "from the author" in reason
    ok, _ = check_commit(_commit([Trailer("Signed-off-by", "Ada Devine <ada@example.org>")]))
    assert not ok  # same e-mail, different name


def test_several_sign_offs_fine():
    trailers = [Trailer("Signed-off-by", "Bob <bob@example.org>"),
                Trailer("Signed-off-by", "Ada Dev <ada@example.org>")]  # fmt: skip
    assert check_commit(_commit(trailers))[0]


def test_folded_trailer_from_a_real_message():
    trailers = parse_trailers("Body.\n\nSigned-off-by: Ada\n  Dev <ada@example.org>\n")
    assert check_commit(_commit(trailers))[0]


def test_co_developer_needs_own_sign_off():
    base = [
        Trailer("Co-developed-by", "Cy <cy@example.org>"),
        Trailer("Signed-off-by", "Ada Dev <ada@example.org>"),
    ]
    ok, reason = _why(_commit(base))
    assert not ok and "Co-developed-by" in reason
    assert check_commit(_commit([*base, Trailer("Signed-off-by", "Cy <CY@example.org>")]))[0]


def _patch(text, commits=None):
    parsed = parse_text(text, "p.patch")
    files = [fp for p in parsed for fp in p.files]
    return PatchUnderAudit(
        "p.patch", 0, text, files, commits or [p.commit for p in parsed], "calc", {"en": "c"}
    )


def test_gate_on_format_patch_and_plain_diff():
    diff = file_diff("vllm/calc.py", "a = 1\n", "a = 2\n")
    signed = _patch(patch_text(diff, trailers="Signed-off-by: Ada Dev <ada@example.org>"))
    assert dco_gate(signed).status == "passed"
    unsigned = dco_gate(_patch(patch_text(diff)))
    assert unsigned.status == "failed" and "1111111111" in gate_summary(unsigned)
    plain = dco_gate(_patch(patch_text(diff, author=None)))
    assert plain.status == "failed" and "no commit metadata" in gate_summary(plain)
    assert plain.details["commits"][0]["ok"] is False


@pytest.mark.parametrize("name", ["Signed-off-by", "signed-off-by"])
def test_gate_never_writes_a_sign_off(name):
    commit = _commit([Trailer(name, "Ada Dev <ada@example.org>")])
    before = list(commit.trailers)
    dco_gate(_patch(patch_text(file_diff("x.py", "a\n", "b\n")), [commit]))
    assert commit.trailers == before
