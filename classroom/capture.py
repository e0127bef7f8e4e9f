"""Answers as data: record the instructor's values and calls, replay the calls on a student's code, encode the results.

This file is copied into each sandbox and imported there on its own (it imports nothing of vitlib). It only
produces data: the comparison happens in the grader (`verdict.py`), in a process no student code ever ran in.

Instructor side (in the instructor's own sandbox, around the check cells of each exercise):
    begin(globals(), key, names)  wraps the answer functions (and nn.Module classes) the checks call
    hidden()                       the calls that follow come from hidden checks
    end(globals(), key, names)     writes expected/<key>.json (values and outputs) and inputs/<key>.pkl (the calls)
Student side (in the student's sandbox, where the checks would run):
    answer(globals(), key, names)  writes answers/<key>.json: the student's values, and the outputs of the student's
                                   functions on the instructor's recorded inputs

An encoded value is a JSON list: ["num", 4], ["str", "c"], ["array", dtype, shape, base64], ["seq", [...]], ...
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
import math
import os
import pickle
import signal

MAX_CALLS = 300  # calls recorded per exercise (the first ones)
MAX_ARRAY = 64 * 2**20  # bytes of one encoded array
_state = {"calls": [], "depth": 0, "phase": "check", "test": "", "restore": []}


def _is_module_class(value) -> bool:
    return isinstance(value, type) and any(c.__module__.startswith("torch.nn") for c in value.__mro__[1:])


def _array(value):
    import numpy as np

    if type(value).__module__.startswith("torch"):
        import torch

        t = value.detach().cpu()
        if t.is_complex():
            t = torch.view_as_real(t)
        if t.dtype in (torch.bfloat16, torch.float16):
            t = t.float()
        value = t.numpy()
    a = np.ascontiguousarray(value)
    if a.dtype.kind not in "biuf" or a.nbytes > MAX_ARRAY:
        return ["object", f"array of {a.dtype} and {a.nbytes} bytes"]
    a = a.astype(a.dtype.newbyteorder("<"))
    return ["array", a.dtype.str, list(a.shape), base64.b64encode(a.tobytes()).decode()]


def encode(value, depth: int = 0):
    """The value as JSON-able data; what cannot be data becomes ["object", <its type>]."""
    if depth > 12:
        return ["object", "nested too deep"]
    if value is None:
        return ["none"]
    if value is Ellipsis:
        return ["todo"]
    if isinstance(value, bool):
        return ["bool", bool(value)]
    if isinstance(value, int):
        return ["num", int.__int__(value)]
    if isinstance(value, float):
        f = float.__float__(value)
        return ["num", f if math.isfinite(f) else repr(f)]
    if isinstance(value, str):
        return ["str", str.__str__(value)]
    if isinstance(value, type) or callable(value) and not hasattr(value, "state_dict"):
        return ["object", f"callable {getattr(value, '__qualname__', type(value).__qualname__)}"]
    module = type(value).__module__
    if module.startswith(("torch", "numpy")) and hasattr(value, "shape") and hasattr(value, "dtype"):
        if module.startswith("numpy") and value.shape == ():
            return encode(value.item(), depth + 1)
        return _array(value)
    if isinstance(value, (tuple, list)) or type(value).__name__ == "Size":
        return ["seq", [encode(v, depth + 1) for v in list(value)[:100000]]]
    if isinstance(value, dict):
        return ["dict", [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in list(value.items())[:10000]]]
    if isinstance(value, (set, frozenset)):
        return ["set", sorted((encode(v, depth + 1) for v in value), key=json.dumps)]
    if hasattr(value, "state_dict") and hasattr(value, "parameters") and callable(value.state_dict):
        return ["module", type(value).__name__, encode(dict(value.state_dict()), depth + 1)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return ["record", type(value).__name__, encode(fields, depth + 1)]
    return ["object", type(value).__qualname__]


def _write(path: str, data) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(data, f)
    os.replace(path + ".tmp", path)


# -- instructor side ---------------------------------------------------------------------------------------------------


def _record(name, kind, blob, call):
    if _state["depth"] or blob is None or len(_state["calls"]) >= MAX_CALLS:
        return call()
    _state["depth"] += 1
    try:
        out = call()
        result = encode(out)
    except BaseException as exc:
        _state["calls"].append(dict(name=name, kind=kind, blob=blob, out=["raises", type(exc).__name__], **_where()))
        raise
    finally:
        _state["depth"] -= 1
    _state["calls"].append(dict(name=name, kind=kind, blob=blob, out=result, **_where()))
    return out


def _where():
    return {"phase": _state["phase"], "test": _state["test"]}


def _dumps(obj):
    try:
        return pickle.dumps(obj, protocol=4)
    except Exception:
        return None  # an input that is not data (a generator, an open file): this call cannot be replayed


def wrap_function(name, fn):
    @functools.wraps(fn)
    def recorded(*args, **kwargs):
        if _state["depth"]:
            return fn(*args, **kwargs)
        return _record(name, "function", _dumps((args, kwargs)), lambda: fn(*args, **kwargs))

    return recorded


def wrap_module_class(name, cls) -> None:
    """Record every outer forward call of instances of `cls`: the constructor's arguments, the weights, the input."""
    init, forward = cls.__dict__.get("__init__"), cls.__dict__.get("forward")

    def __init__(self, *args, **kwargs):
        self.__dict__["_classroom_init"] = _dumps((args, kwargs))
        if init is not None:
            init(self, *args, **kwargs)
        else:
            super(cls, self).__init__(*args, **kwargs)

    def recorded_forward(self, *args, **kwargs):
        original = functools.partial(forward, self) if forward else super(cls, self).forward
        made = self.__dict__.get("_classroom_init")
        if _state["depth"] or made is None:
            return original(*args, **kwargs)
        state = {k: v.detach().clone() for k, v in self.state_dict().items()}
        blob = _dumps(dict(init=made, state=state, training=self.training, call=(args, kwargs)))
        return _record(name, "module", blob, lambda: original(*args, **kwargs))

    cls.__init__, cls.forward = __init__, recorded_forward
    _state["restore"].append((cls, init, forward))


def _unwrap_classes():
    for cls, init, forward in _state["restore"]:
        for attr, value in (("__init__", init), ("forward", forward)):
            if value is None:
                delattr(cls, attr)
            else:
                setattr(cls, attr, value)
    _state["restore"] = []


def begin(namespace: dict, key: str, names: list[str]) -> None:
    _state.update(calls=[], phase="check", originals={})
    for name in names:
        value = namespace.get(name)
        if _is_module_class(value):
            wrap_module_class(name, value)
        elif callable(value) and not isinstance(value, type):
            _state["originals"][name] = value
            namespace[name] = wrap_function(name, value)
    _state["values"] = {n: encode(namespace.get(n)) for n in names if not callable(namespace.get(n))}


def hidden() -> None:
    _state["phase"] = "hidden"


def end(namespace: dict, key: str, names: list[str], folder: str = "../.classroom") -> None:
    namespace.update(_state.pop("originals", {}))
    _unwrap_classes()
    _save(folder, key, _state.pop("values", {}), _state["calls"])
    _state["calls"] = []


def _save(folder, key, values, calls):
    inputs = [dict(name=c["name"], kind=c["kind"], blob=c["blob"]) for c in calls]
    with open(os.path.join(folder, "inputs", key + ".pkl"), "wb") as f:
        pickle.dump(inputs, f, protocol=4)
    outputs = [dict(name=c["name"], phase=c["phase"], test=c["test"], out=c["out"]) for c in calls]
    _write(os.path.join(folder, "expected", key + ".json"), {"values": values, "calls": outputs})


def library_recorder(module) -> None:
    """Wrap the library solution's functions and nn.Module classes (pytest then runs the instructor's tests)."""
    for name, value in list(vars(module).items()):
        if getattr(value, "__module__", None) != module.__name__:
            continue
        if _is_module_class(value):
            wrap_module_class(name, value)
        elif callable(value) and not isinstance(value, type):
            setattr(module, name, wrap_function(name, value))


def set_test(name: str, is_hidden: bool) -> None:
    _state["test"], _state["phase"] = name, "hidden" if is_hidden else "check"


def save_library(folder: str) -> None:
    _save(folder, "library", {}, _state["calls"])


# -- student side ------------------------------------------------------------------------------------------------------


class _Late(BaseException):
    pass


def _alarm(seconds):
    def stop(signum, frame):
        raise _Late()

    if seconds:
        signal.signal(signal.SIGALRM, stop)
        signal.alarm(int(max(1, seconds)))


def replay(find, call: dict, seconds: float | None = None):
    """The encoded output of the student's `call` (found by `find(name)`), or why there is none."""
    import contextlib

    try:
        target = find(call["name"])
        if target is None:
            return ["missing"]
        _alarm(seconds)
        try:
            no_grad = contextlib.nullcontext()
            if call["kind"] == "module":
                import torch

                no_grad = torch.no_grad()
                data = pickle.loads(call["blob"])
                args, kwargs = pickle.loads(data["init"])
                obj = target(*args, **kwargs)
                obj.load_state_dict(data["state"], strict=True)
                obj.train(data["training"])
                args, kwargs = data["call"]
                with no_grad:
                    return encode(obj(*args, **kwargs))
            args, kwargs = pickle.loads(call["blob"])
            return encode(target(*args, **kwargs))
        finally:
            signal.alarm(0)
    except _Late:
        return ["timeout"]
    except KeyboardInterrupt:  # the notebook's cell timeout: the exercise is not graded further
        raise
    except BaseException as exc:  # noqa: BLE001 - the student's error is the result
        text = str(exc).splitlines()[0][:300] if str(exc) else ""
        return ["raises", type(exc).__name__, text]


def answer(namespace: dict, key: str, names: list[str], folder: str = "../.classroom") -> None:
    """The student's values for `names` and outputs on the instructor's inputs, to answers/<key>.json."""
    values = {n: encode(namespace[n]) if n in namespace else ["missing"] for n in names}
    values = {n: v for n, v in values.items() if not callable(namespace.get(n))}  # functions: by their outputs
    try:
        with open(os.path.join(folder, "inputs", key + ".pkl"), "rb") as f:
            calls = pickle.load(f)
    except FileNotFoundError:
        calls = []
    outputs = [replay(namespace.get, c) for c in calls]
    _write(os.path.join(folder, "answers", key + ".json"), {"values": values, "calls": outputs})


def answer_library(module_name: str, folder: str, seconds: float) -> None:
    """Import the student's file and replay every recorded call on it, saving after each one."""
    import importlib

    path = os.path.join(folder, "answers", "library.json")
    try:
        module = importlib.import_module(module_name)
    except BaseException as exc:  # noqa: BLE001
        _write(path, {"import_error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"})
        return
    with open(os.path.join(folder, "inputs", "library.pkl"), "rb") as f:
        calls = pickle.load(f)
    outputs = []
    for call in calls:
        outputs.append(replay(lambda name: getattr(module, name, None), call, seconds))
        _write(path, {"values": {}, "calls": outputs})
    _write(path, {"values": {}, "calls": outputs})
