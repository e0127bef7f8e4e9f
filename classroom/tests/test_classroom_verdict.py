"""The grader's comparison (verdict.py) of answers encoded as data (capture.py): no sandbox needed."""

import json
from pathlib import Path

import numpy as np
import torch
from torch import nn

from classroom import capture, verdict

REPO = Path(__file__).resolve().parents[2]


def same(a, b):
    return verdict.differ(capture.encode(a), capture.encode(b)) is None


def test_numbers_strings_and_containers():
    assert same(576, 576.0) and not same(576, 577) and not same(True, 1)
    assert same("c", " C ") and not same("c", "b")
    assert same((1, 2), [1, 2]) and not same((1, 2), (1, 2, 3))
    assert same({"a": 1}, {"a": 1.0}) and not same({"a": 1}, {"b": 1})
    assert not same(..., 4) and not same(None, 0)


def test_arrays_by_shape_kind_and_values():
    x = torch.randn(2, 3)
    assert same(x, x.clone() + 1e-7) and same(x, x.double()) and same(x, x.numpy())
    assert not same(x, x.T) and not same(x, x + 1e-2) and not same(x.long(), x)
    assert verdict.differ(capture.encode(x), capture.encode(x[:1])) == "its shape is (1, 3), not (2, 3)"
    assert same(torch.arange(5), np.arange(5)) and not same(torch.arange(5), torch.arange(1, 6))


def test_what_claims_equality_is_only_its_data():
    class Liar(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

    class Anything:
        def __eq__(self, other):
            return True

    assert not same(4, Liar(5)) and same(4, Liar(4))
    assert not same(4, Anything()) and "an object of type" in verdict.differ(
        capture.encode(4), capture.encode(Anything())
    )


def test_modules_compare_by_their_weights():
    torch.manual_seed(0)
    a = nn.Linear(3, 2)
    b = nn.Linear(3, 2)
    assert same(a, a) and not same(a, b)


def test_malformed_data_is_a_wrong_answer_not_a_crash():
    expected = capture.encode(torch.ones(2))
    for bad in (["array", "O", [2], "AAAA"], ["array", "<f4", [10**9], ""], ["num"], [], "x", None, ["seq", 3]):
        assert verdict.differ(expected, bad) is not None
    assert verdict.judge({"values": {"q1": ["str", "c"]}}, {"values": {"q1": ["str", "b"]}})[0] == "failed"
    assert verdict.judge({"values": {"q1": ["str", "c"]}}, {"values": "nonsense"})[0] == "failed"
    assert verdict.judge({"values": {"q1": ["str", "c"]}}, None)[0] == "error"
    assert verdict.judge({}, {"values": {}})[0] == "error"  # nothing recorded: never free points


def test_calls_are_judged_with_their_inputs_origin(tmp_path):
    expected = {"values": {}, "calls": [
        {"name": "f", "phase": "check", "test": "", "out": ["num", 3]},
        {"name": "f", "phase": "hidden", "test": "", "out": ["num", -6]},
    ]}  # fmt: skip
    assert verdict.judge(expected, {"calls": [["num", 3], ["num", -6]]}) == ("passed", "", False)
    status, message, hidden = verdict.judge(expected, {"calls": [["num", 3], ["num", 6]]})
    assert (status, hidden) == ("failed", True) and message.startswith("f(...) on input 2 of 2")
    assert verdict.judge(expected, {"calls": [["timeout"]]})[0] == "timeout"
    assert verdict.judge(expected, {"calls": [["raises", "ValueError", "no"]]})[1].endswith("raised ValueError: no")
    big = tmp_path / "answers.json"
    big.write_text(json.dumps({"values": {}}))
    assert verdict.load(tmp_path, "answers.json") == {"values": {}}
    (tmp_path / "link.json").symlink_to(big)
    assert verdict.load(tmp_path, "link.json") is None and verdict.load(tmp_path, "none.json") is None


def test_what_a_sandbox_wrote_is_read_without_following_any_link(tmp_path):
    """A job that replaces .classroom/answers with a link to a neighbour's answers (found via /proc/self/mountinfo)
    scored 9/9 on a blank notebook: no part of the path is followed through a link now."""
    neighbour, job = tmp_path / "jobs" / "00001", tmp_path / "jobs" / "00002"
    (neighbour / ".classroom" / "answers").mkdir(parents=True)
    (neighbour / ".classroom" / "answers" / "e1.json").write_text('{"values": {"x": ["num", 1]}}')
    (job / ".classroom").mkdir(parents=True)
    (job / ".classroom" / "answers").symlink_to(neighbour / ".classroom" / "answers")
    assert verdict.load(neighbour, ".classroom/answers/e1.json") == {"values": {"x": ["num", 1]}}
    assert verdict.load(job, ".classroom/answers/e1.json") is None  # the folder is a link
    (job / "outer").symlink_to(neighbour)
    assert verdict.read_beneath(job, "outer/.classroom/answers/e1.json") is None
    assert verdict.read_beneath(job, "../00001/.classroom/answers/e1.json") is None
    recording = tmp_path / "instructor" / "assignment" / "answers"  # the instructor's recording scored 3/9 blank
    recording.mkdir(parents=True)
    (recording / "e1.json").write_text('{"values": {"x": ["num", 1]}}')
    (job / ".classroom" / "answers").unlink()
    (job / ".classroom" / "answers").symlink_to(recording)
    assert verdict.load(job, ".classroom/answers/e1.json") is None
    (neighbour / "fifo").parent.mkdir(exist_ok=True)
    import os

    os.mkfifo(neighbour / "fifo")
    assert verdict.read_beneath(neighbour, "fifo") is None  # not a regular file: not read (and no hang)
    (neighbour / "big").write_bytes(b"x" * 101)
    assert verdict.read_beneath(neighbour, "big", limit=100) is None
    assert verdict.read_beneath(neighbour, "big", limit=101) == b"x" * 101


def test_a_measured_answer_is_judged_within_its_tolerance():
    """10's speed_ratio is timed in each run: course.rtol lets it come near the instructor's, and nothing else."""
    expected = {"values": {"speed_ratio": capture.encode(2.0), "flops_ratio": capture.encode(12.25)}}

    def judged(speed, flops):
        answers = {"values": {"speed_ratio": capture.encode(speed), "flops_ratio": capture.encode(flops)}}
        return verdict.judge(expected, answers, rtol={"speed_ratio": 0.5})[0]

    assert judged(2.6, 12.25) == "passed" and judged(1.3, 12.25) == "passed"
    assert judged(0.5, 12.25) == "failed"  # the inverse ratio is no measurement noise
    assert judged(2.0, 12.3) == "failed"  # the counted FLOPs get no tolerance
    assert (
        verdict.judge(expected, {"values": {"speed_ratio": capture.encode(2.6), "flops_ratio": capture.encode(12.25)}})[
            0
        ]
        == "failed"
    )


def test_rtol_comes_from_the_check_cell_and_must_be_sane():
    import nbformat
    import pytest

    from classroom.notebooks import parse_exercises

    nb = nbformat.read(REPO / "notebooks" / "10_patch_size_and_shape.ipynb", as_version=4)
    assert any(e.rtol == {"speed_ratio": 0.5} for e in parse_exercises(nb, "10"))
    check = next(c for c in nb.cells if "exercise-check" in c.metadata.get("tags", []))
    check.metadata["course"] = {"rtol": {"x": "lots"}}
    with pytest.raises(ValueError, match="course.rtol maps answer names to tolerances"):
        parse_exercises(nb, "10")
