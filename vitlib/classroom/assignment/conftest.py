"""The grader's conftest: a time limit per test (SIGALRM), so that an endless loop fails one test, not the run."""

import os
import signal

import pytest

LIMIT = int(os.environ.get("CLASSROOM_TEST_TIMEOUT", "60"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    def stop(signum, frame):
        raise TimeoutError(f"the test ran past {LIMIT} s and was stopped (an endless loop?)")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(LIMIT)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
