"""Run one of the grader's functions in a child process with a memory and a time limit.

What a student made (the submitted notebook, what the sandbox wrote back) is parsed in the grader, outside the
sandbox: a 29 MB notebook of outputs cost 5.5 GB and 33 s in the grader's own process (issue 61). `call` parses it in a
fresh child instead (forkserver: the grader's threads are not forked), so a file too large or too slow to read costs
that student the exercise, never the class its grading.
"""

from __future__ import annotations

import multiprocessing
import pickle
import resource

MEMORY_GB, SECONDS = 4.0, 120.0


class LimitExceeded(Exception):
    """The child ran out of memory or time, or died: the message says which."""


def _mapped() -> int:
    """Bytes of address space this process has mapped already (the grader's modules: about 3.5 GB with torch)."""
    for line in open("/proc/self/status"):
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


def _child(send, memory: int, func, args) -> None:
    limit = _mapped() + memory  # `memory` more than the modules take
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        result = ("ok", func(*args))
    except MemoryError:
        result = ("limit", "over its memory limit")
    except Exception as exc:  # noqa: BLE001 - raised again in the grader
        result = ("raised", exc)
    try:
        send.send(result)
    except (pickle.PicklingError, TypeError, AttributeError):
        send.send(("raised", RuntimeError(repr(result[1])[:300])))


def call(func, *args, memory_gb: float = MEMORY_GB, seconds: float = SECONDS):
    """func(*args) in a child allowed `memory_gb` of address space beyond what its modules map, and `seconds`: its
    result, or the exception it raised; LimitExceeded when a limit was reached."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["classroom.worker"])
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, int(memory_gb * 2**30), func, args), daemon=True)
    proc.start()
    send.close()
    try:
        if not receive.poll(seconds):
            raise LimitExceeded(f"it took over {seconds:g} s to read")
        status, value = receive.recv()
    except EOFError:
        raise LimitExceeded(f"reading it ended the reader (over {memory_gb:g} GB?)") from None
    finally:
        proc.kill()
        proc.join()
        receive.close()
    if status == "limit":
        raise LimitExceeded(f"reading it took over {memory_gb:g} GB")
    if status == "raised":
        raise value
    return value
