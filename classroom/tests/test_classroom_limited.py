"""The grader parses what a student made in a child with a memory and time limit (issue 61): a file too large or too
slow to read costs that student the exercise, and the grader's own process stays small."""

import json
import time

import pytest

from classroom import limited


def allocate(gb):
    return len(bytearray(int(gb * 2**30)))


def slow(seconds):
    time.sleep(seconds)


def refuse(text):
    raise ValueError(text)


def parse(path):
    return len(json.loads(path.read_text()))


def test_a_result_and_an_exception_come_back_as_they_are():
    assert limited.call(allocate, 0.01) == int(0.01 * 2**30)
    with pytest.raises(ValueError, match="not a notebook: export it again"):
        limited.call(refuse, "not a notebook: export it again")


def test_memory_and_time_past_the_limit_are_limit_exceeded():
    with pytest.raises(limited.LimitExceeded, match="over 1 GB"):
        limited.call(allocate, 2, memory_gb=1)
    start = time.monotonic()
    with pytest.raises(limited.LimitExceeded, match="over 1 s"):
        limited.call(slow, 30, seconds=1)
    assert time.monotonic() - start < 15


def test_a_file_that_takes_gigabytes_to_parse_is_refused_in_the_child(tmp_path):
    """60 MB of empty JSON objects is 1.4 GB of Python dicts: under a 1 GB limit the reader stops, the grader lives;
    a tenth of it is read."""
    path = tmp_path / "answers.json"
    path.write_text("[" + ",".join(["{}"] * 20_000_000) + "]")
    with pytest.raises(limited.LimitExceeded, match="over 1 GB"):
        limited.call(parse, path, memory_gb=1)
    path.write_text("[" + ",".join(["{}"] * 2_000_000) + "]")
    assert limited.call(parse, path, memory_gb=1) == 2_000_000
