"""Recorded inputs never carry an expected output (issue 61): a check that passes one answer's result to another
answer (split_heads, then merge_heads on its result) records a reference to that call, and the student's own result
takes its place when the calls are replayed. No sandbox needed."""

import pickle

import pytest
import torch

from classroom import capture, encoding, verdict


def split_heads(x):
    return x.reshape(2, 3, 4).transpose(0, 1)


def merge_heads(h):
    return h.transpose(0, 1).reshape(2, 12)


def record(tmp_path, namespace):
    for sub in ("inputs", "expected", "answers"):
        (tmp_path / sub).mkdir(exist_ok=True)
    names = ["split_heads", "merge_heads"]
    capture.begin(namespace, "e3", names)
    x = torch.arange(24.0).reshape(2, 12)
    split = namespace["split_heads"](x)
    assert torch.equal(namespace["merge_heads"](split), x)  # the round trip
    assert torch.equal(namespace["merge_heads"](split.clone()), x)  # a copy is the same output
    capture.end(namespace, "e3", names, folder=str(tmp_path))
    return verdict.load(tmp_path, "expected/e3.json")


def test_an_input_that_was_an_earlier_output_is_stored_as_a_reference(tmp_path):
    expected = record(tmp_path, {"split_heads": split_heads, "merge_heads": merge_heads})
    calls = pickle.loads((tmp_path / "inputs" / "e3.pkl").read_bytes())
    assert len(calls) == len(expected["calls"]) == 3
    pickle.loads(calls[0]["blob"])  # x itself is the instructor's input
    for chained in calls[1:]:  # split's output is not in the file: only a reference to call 1
        with pytest.raises(pickle.UnpicklingError, match="persistent"):
            pickle.loads(chained["blob"])


def answers(tmp_path, namespace):
    capture.answer(namespace, "e3", ["split_heads", "merge_heads"], folder=str(tmp_path))
    return verdict.load(tmp_path, "answers/e3.json")


def test_replayed_with_the_students_own_result(tmp_path):
    expected = record(tmp_path, {"split_heads": split_heads, "merge_heads": merge_heads})
    honest = answers(
        tmp_path, {"split_heads": lambda x: x.reshape(2, 3, 4).permute(1, 0, 2), "merge_heads": merge_heads}
    )
    assert verdict.judge(expected, honest)[0] == "passed"

    def lookup(x):  # the attack: split_heads returns what merge_heads was recorded with
        blob = pickle.loads((tmp_path / "inputs" / "e3.pkl").read_bytes())[1]["blob"]
        return pickle.loads(blob)[0][0]

    cheat = answers(tmp_path, {"split_heads": lookup, "merge_heads": merge_heads})
    assert cheat["calls"][0][0] == "raises" and verdict.judge(expected, cheat)[0] != "passed"
    wrong_split = answers(tmp_path, {"split_heads": lambda x: None, "merge_heads": merge_heads})
    assert wrong_split["calls"][1][0] == "raises"  # merge_heads(None): the student's own split, not the instructor's


def same(a, b):
    return verdict.differ(capture.encode(a), capture.encode(b)) is None


def test_generators_functions_large_arrays_and_long_lists_compare_by_content(monkeypatch):
    def counting():
        yield from range(5)

    assert same(counting(), counting()) and same(counting(), [0, 1, 2, 3, 4])
    assert not same(counting(), (x for x in ()))  # `yield from ()` passed when only the type was compared
    assert same(lambda step: 0.0, print)  # a function is judged by its recorded calls, whatever its name
    monkeypatch.setattr(encoding, "MAX_ARRAY", 1024)
    monkeypatch.setattr(encoding, "MAX_ITEMS", 10)
    big = torch.linspace(0, 1, 4096)
    assert capture.encode(big)[0] == "bigarray" and same(big, big.clone())
    assert not same(big, torch.zeros(4096))
    assert not same(big, big.flip(0))  # same statistics, other elements
    assert not same(big, big + 1e-3 * (big > 0.5)) and same(big, big * (1 + 1e-6))  # within the tolerance
    assert same(list(range(50)), list(range(50)))
    wrong_late = list(range(49)) + [0]  # wrong from item 10 on: beyond the items compared one by one
    assert verdict.differ(capture.encode(list(range(50))), capture.encode(wrong_late)) == "items from 10 on differ"
    assert "items, not 50" in verdict.differ(capture.encode(list(range(50))), capture.encode(list(range(51))))


def make_schedule(peak):
    def schedule(step):
        return peak * min(1.0, step / 10)

    return schedule


def test_a_returned_function_is_judged_by_what_it_returns(tmp_path):
    for sub in ("inputs", "expected", "answers"):
        (tmp_path / sub).mkdir()
    namespace = {"make_schedule": make_schedule}
    capture.begin(namespace, "e4", ["make_schedule"])
    schedule = namespace["make_schedule"](0.5)
    assert [schedule(s) for s in (0, 5, 20)] == [0.0, 0.25, 0.5]
    capture.end(namespace, "e4", ["make_schedule"], folder=str(tmp_path))
    expected = verdict.load(tmp_path, "expected/e4.json")
    assert [c["name"] for c in expected["calls"]] == ["make_schedule"] + ["make_schedule(...)"] * 3

    def graded(fn):
        capture.answer({"make_schedule": fn}, "e4", ["make_schedule"], folder=str(tmp_path))
        return verdict.judge(expected, verdict.load(tmp_path, "answers/e4.json"))[0]

    def honest(peak):  # another name, another inner function, the same behaviour
        return lambda step: peak * (step / 10 if step < 10 else 1.0)

    assert graded(honest) == "passed"
    assert graded(lambda peak: lambda step: 0.0) == "failed"


def test_a_constant_input_is_not_taken_for_an_earlier_output(tmp_path, monkeypatch):
    """An earlier call returned (2, 3): a later call's constant 3 is still the instructor's input (Python shares small
    ints, so identity alone would chain it); an array past MAX_ARRAY against a small one is judged by its shape."""
    for sub in ("inputs", "expected"):
        (tmp_path / sub).mkdir()
    namespace = {"pair": lambda: (2, 3), "triple": lambda n: 3 * n}
    capture.begin(namespace, "e5", ["pair", "triple"])
    assert namespace["triple"](namespace["pair"]()[1]) == 9
    capture.end(namespace, "e5", ["pair", "triple"], folder=str(tmp_path))
    calls = pickle.loads((tmp_path / "inputs" / "e5.pkl").read_bytes())
    assert pickle.loads(calls[1]["blob"]) == ((3,), {})
    monkeypatch.setattr(encoding, "MAX_ARRAY", 1024)
    big, small = capture.encode(torch.linspace(0, 1, 4096)), capture.encode(torch.zeros(8))
    assert verdict.differ(big, small) == "its shape is (8,), not (4096,)"
    assert verdict.differ(big, capture.encode(torch.zeros(4096, dtype=torch.int64))).startswith("its dtype is int64")
