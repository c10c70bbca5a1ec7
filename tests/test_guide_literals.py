"""A long changed default is shown by what changed in it (a real partial pick of vLLM 0.34.0 put
``_REASONING_PARSERS_TO_REGISTER`` — 56 entries — twice into the series lead)."""

from __future__ import annotations

from patchkit.guide.literals import LONG, compact_change


def _registry(names: list[str]) -> str:
    return repr({n: (f"{n}_reasoning_parser", f"{n.title()}ReasoningParser") for n in names})


def test_a_long_dict_is_its_size_and_the_keys_added_removed_and_changed():
    names = [f"parser{i}" for i in range(54)]
    old = _registry([*names, "musespark1x"])
    new_map = {
        n: (f"{n}_reasoning_parser", f"{n.title()}ReasoningParser") for n in [*names, "ripple", "zaya"]
    }
    new_map["parser3"] = ("other", "Other")
    was, now = compact_change(old, repr(new_map))
    assert was == "{…55 keys}"
    assert now == "{…56 keys: +'ripple', +'zaya', -'musespark1x', ~'parser3'}"
    assert len(now) < 2 * LONG


def test_short_values_stay_whole_and_long_lists_name_at_most_six_items():
    assert compact_change("4096", "8192") == ("4096", "8192")
    old = repr([f"model-{i}" for i in range(20)])
    new = repr([f"model-{i}" for i in range(3, 30)])
    was, now = compact_change(old, new)
    assert was == "[…20 items]"
    assert now.startswith("[…27 items: +'model-20', +'model-21'") and now.endswith(", +7 more]")
    assert now.count("'") == 12  # six named


def test_anything_else_long_is_cut():
    was, now = compact_change("'" + "a" * 200 + "'", "'" + "b" * 200 + "'")
    assert len(was) == LONG and was.endswith("…") and now.startswith("'bbb")
