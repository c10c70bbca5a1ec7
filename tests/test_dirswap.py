"""``patchkit.txn.dirswap``: a fault at every step of a change, then ``recover``, leaves the live
dir old (staged discarded, no follow-up) or new (follow-up done); someone's edit of the live dir
after a crash decides nothing wrongly."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchkit.txn import dirswap, journal

STEPS = ["dirswap:recorded", "dirswap:swapped", "dirswap:forwarded", "dirswap:cleaned"]


class Fault(Exception):
    pass


def dirs(tmp_path: Path) -> tuple[Path, Path, Path]:
    live, staged = tmp_path / "series", tmp_path / ".series.new"
    live.mkdir(parents=True)
    (live / "0001-a.patch").write_text("old\n")
    (live / "series").write_text("0001-a.patch\n")
    staged.mkdir()
    (staged / "0001-a.patch").write_text("new\n")
    (staged / "0002-b.patch").write_text("b\n")
    (staged / "series").write_text("0001-a.patch\n0002-b.patch\n")
    return live, staged, tmp_path / "state"


@pytest.mark.parametrize("at", STEPS)
def test_a_fault_at_each_step_is_finished_or_discarded(tmp_path: Path, monkeypatch, at: str) -> None:
    live, staged, state = dirs(tmp_path)
    old, new = dirswap.digest(live), dirswap.digest(staged)
    lock = tmp_path / "index.lock"
    forwarded: list[dict] = []

    def forward(record: dict) -> None:
        lock.write_text("")  # what a follow-up killed part-way leaves
        forwarded.append(record)
        lock.unlink()

    def hook(name: str) -> None:
        if name == at:
            raise Fault(name)

    monkeypatch.setattr(journal, "fault_hook", hook)
    with pytest.raises(Fault):
        dirswap.change(state, live, staged, {"op": "t"}, forward, [lock])
    monkeypatch.setattr(journal, "fault_hook", None)
    assert dirswap.pending(state)["op"] == "t"
    lock.write_text("")  # a git lock file: ours (the record says so) only if the swap happened
    outcome, record = dirswap.recover(state, forward)
    assert outcome == ("discarded" if at == "dirswap:recorded" else "finished")
    assert dirswap.digest(live) == (old if outcome == "discarded" else new)
    assert len(forwarded) == {"dirswap:recorded": 0, "dirswap:swapped": 1}.get(at, 2)  # again: idempotent
    assert not staged.exists() and dirswap.pending(state) is None
    assert lock.exists() == (outcome == "discarded")  # no follow-up of ours ran: not our lock, kept
    assert dirswap.recover(state, forward) is None  # a second recovery has nothing to do


def test_an_edit_of_the_live_dir_after_the_crash_is_kept_either_way(tmp_path: Path, monkeypatch) -> None:
    for at, expected in (("dirswap:recorded", "discarded"), ("dirswap:swapped", "finished")):
        live, staged, state = dirs(tmp_path / at.replace(":", "-"))
        monkeypatch.setattr(
            journal, "fault_hook", lambda name, at=at: (_ for _ in ()).throw(Fault()) if name == at else None
        )
        with pytest.raises(Fault):
            dirswap.change(state, live, staged, {"op": "t"}, lambda r: None)
        monkeypatch.setattr(journal, "fault_hook", None)
        (live / "notes.txt").write_text("the user's, written after the crash\n")
        outcome, _ = dirswap.recover(state, lambda r: None)
        assert outcome == expected
        assert (live / "notes.txt").read_text() == "the user's, written after the crash\n"
        assert ((live / "0001-a.patch").read_text() == "new\n") == (expected == "finished")


def test_an_unreadable_record_is_one_line_and_changes_nothing(tmp_path: Path) -> None:
    live, staged, state = dirs(tmp_path)
    state.mkdir()
    (state / dirswap.RECORD).write_text("{")
    with pytest.raises(Exception, match="unreadable"):
        dirswap.recover(state, lambda r: None)
    assert (live / "0001-a.patch").read_text() == "old\n" and staged.is_dir()
