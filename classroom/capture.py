"""Answers as data: record the instructor's values and calls, replay the calls on a student's code, encode the results.

This file is copied into each sandbox with encoding.py and imported there on its own (no vitlib). It only
produces data: the comparison happens in the grader (`verdict.py`), in a process no student code ever ran in.

Instructor side (in the instructor's own sandbox, around the check cells of each exercise):
    begin(globals(), key, names)  wraps the answer functions (and nn.Module classes) the checks call
    hidden()                       the calls that follow come from hidden checks
    end(globals(), key, names)     writes expected/<key>.json (values and outputs) and inputs/<key>.pkl (the calls)
Student side (in the student's sandbox, where the checks would run):
    answer(globals(), key, names)  writes answers/<key>.json: the student's values, and the outputs of the student's
                                   functions on the instructor's recorded inputs

How a value becomes data: encoding.py.
"""

from __future__ import annotations

import functools
import io
import os
import pickle
import signal

try:  # in the grader: classroom.capture; in a sandbox: capture, beside encoding.py
    from .encoding import encode
    from .encoding import write_json as _write
except ImportError:
    from encoding import encode
    from encoding import write_json as _write

MAX_CALLS = 300  # calls recorded per exercise (the first ones)
_state = {"calls": [], "depth": 0, "phase": "check", "test": "", "restore": [], "made": []}


def _is_module_class(value) -> bool:
    return isinstance(value, type) and any(c.__module__.startswith("torch.nn") for c in value.__mro__[1:])


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
    if result == ["callable"]:  # a function it returned: the checks' calls of it are recorded too
        out = _wrap_returned(name, out, len(_state["calls"]))
    _register(out, len(_state["calls"]), ())
    _state["calls"].append(dict(name=name, kind=kind, blob=blob, out=result, **_where()))
    return out


def _wrap_returned(name, fn, index: int):
    @functools.wraps(fn)
    def recorded(*args, **kwargs):
        if _state["depth"]:
            return fn(*args, **kwargs)
        return _record(f"{name}(...)", "returned", _dumps((index, args, kwargs)), lambda: fn(*args, **kwargs))

    return recorded


def _register(out, index: int, path: tuple, depth: int = 0) -> None:
    """Remember a recorded call's output (and the items of a tuple or list it returned) as ("earlier", index, path).
    Not a number, string or None: Python shares those, so a constant input would look like an earlier output."""
    if not isinstance(out, (int, float, complex, str, bytes, type(None))):
        _state["made"].append((out, ("earlier", index, path)))
    if isinstance(out, (tuple, list)) and depth < 2:
        for k, item in enumerate(out[:64]):
            _register(item, index, path + (k,), depth + 1)


class _Pickler(pickle.Pickler):
    """Pickles a call's inputs; an input that is an earlier call's output (the same object, or an equal tensor or
    array) is stored as a reference to that call, never as its value: replayed, it is the student's own result."""

    def persistent_id(self, obj):
        if not hasattr(obj, "shape"):  # most inputs: only the same object can be an earlier output
            return next((ref for made, ref in _state["made"] if made is obj), None)
        return next((ref for made, ref in _state["made"] if made is obj or _same_array(made, obj)), None)


def _same_array(a, b) -> bool:
    """Whether b is a copy of the output a (a tensor or array of at least two different values: zeros are no answer)."""
    if not (type(a) is type(b) and hasattr(a, "shape") and a.shape == b.shape and a.dtype == b.dtype):
        return False
    if type(a).__module__.startswith("torch"):
        a, b = a.detach().cpu(), b.detach().cpu()
    flat = a.reshape(-1)
    return len(flat) > 1 and bool((flat != flat[0]).any()) and bool((a == b).all())


def _where():
    return {"phase": _state["phase"], "test": _state["test"]}


def _dumps(obj):
    try:
        buffer = io.BytesIO()
        _Pickler(buffer, protocol=4).dump(obj)
        return buffer.getvalue()
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
    _state.update(calls=[], phase="check", originals={}, made=[])
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
    _state["calls"], _state["made"] = [], []


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


class _Unpickler(pickle.Unpickler):
    """Loads a call's inputs with the student's own results where the instructor's call used an earlier output."""

    def __init__(self, blob: bytes, earlier: list):
        super().__init__(io.BytesIO(blob))
        self.earlier = earlier

    def persistent_load(self, ref):
        _, index, path = ref
        return _earlier(self.earlier, index, path)


_Missing = object()


def _earlier(earlier: list, index: int, path: tuple = ()):
    """The student's result of call `index` (an item of it, by `path`)."""
    value = earlier[index] if index < len(earlier) else _Missing
    if value is _Missing:
        raise LookupError(f"needs the result of call {index + 1}, which your code did not return")
    for k in path:
        value = value[k]
    return value


def _call(target, call: dict, earlier: list):
    def load(blob):
        return _Unpickler(blob, earlier).load()

    if call["kind"] == "returned":  # a call of the function an earlier call returned: the student's own
        index, args, kwargs = load(call["blob"])
        return _earlier(earlier, index)(*args, **kwargs)
    if call["kind"] != "module":
        args, kwargs = load(call["blob"])
        return target(*args, **kwargs)
    import torch

    data = load(call["blob"])
    args, kwargs = load(data["init"])
    obj = target(*args, **kwargs)
    obj.load_state_dict(data["state"], strict=True)
    obj.train(data["training"])
    args, kwargs = data["call"]
    with torch.no_grad():
        return obj(*args, **kwargs)


def replay(find, call: dict, seconds: float | None = None, earlier: list | None = None):
    """The encoded output of the student's `call` (found by `find(name)`), or why there is none. `earlier`: the
    student's results of the calls before (appended to: an input that was an earlier output is the student's own)."""
    earlier = [] if earlier is None else earlier
    result = _Missing
    try:
        target = find(call["name"]) if call["kind"] != "returned" else "earlier"
        if target is None:
            return ["missing"]
        _alarm(seconds)
        try:
            result = _call(target, call, earlier)
            return encode(result)
        finally:
            signal.alarm(0)
    except _Late:
        return ["timeout"]
    except KeyboardInterrupt:  # the notebook's cell timeout: the exercise is not graded further
        raise
    except BaseException as exc:  # noqa: BLE001 - the student's error is the result
        text = str(exc).splitlines()[0][:300] if str(exc) else ""
        return ["raises", type(exc).__name__, text]
    finally:
        earlier.append(result)


def answer(namespace: dict, key: str, names: list[str], folder: str = "../.classroom") -> None:
    """The student's values for `names` and outputs on the instructor's inputs, to answers/<key>.json."""
    values = {n: encode(namespace[n]) if n in namespace else ["missing"] for n in names}
    values = {n: v for n, v in values.items() if not callable(namespace.get(n))}  # functions: by their outputs
    try:
        with open(os.path.join(folder, "inputs", key + ".pkl"), "rb") as f:
            calls = pickle.load(f)
    except FileNotFoundError:
        calls = []
    earlier = []
    outputs = [replay(namespace.get, c, earlier=earlier) for c in calls]
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
    outputs, earlier = [], []
    for call in calls:
        outputs.append(replay(lambda name: getattr(module, name, None), call, seconds, earlier))
        _write(path, {"values": {}, "calls": outputs})
    _write(path, {"values": {}, "calls": outputs})
