"""Values as data: what an answer is, encoded as JSON, so that the grader compares data and never runs student code.

An encoded value is a JSON list: ["num", 4], ["str", "c"], ["array", dtype, shape, base64], ["seq", [...]] (and
["rest", count, sha256] after the first MAX_ITEMS items), ["bigarray", dtype, shape, statistics, sample] for an array
over MAX_ARRAY bytes, ["callable"] for a function (judged by the recorded calls of it), ... Copied into each sandbox
with capture.py; it imports nothing of vitlib.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import os
import types

MAX_ARRAY = 64 * 2**20  # bytes of one array encoded in full (a larger one: statistics and samples)
MAX_ITEMS, MAX_REST = 100_000, 10_000_000  # items of a sequence encoded one by one; more items, by one digest


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
    if a.dtype.kind not in "biuf":
        return ["object", f"array of {a.dtype}"]
    if a.nbytes > MAX_ARRAY:  # by its statistics and 4,096 elements spread over it
        flat = a.reshape(-1)
        stats = [float(x) for x in (np.nanmean(flat, dtype=np.float64), np.nanstd(flat, dtype=np.float64))]
        stats += [
            float(np.nanmin(flat)),
            float(np.nanmax(flat)),
            int(np.isnan(flat).sum()) if a.dtype.kind == "f" else 0,
        ]
        sample = _full(np.ascontiguousarray(flat[:: max(1, flat.size // 4096)][:4096]))
        return ["bigarray", a.dtype.str, list(a.shape), [x if math.isfinite(x) else repr(x) for x in stats], sample]
    return _full(a)


def _full(a):
    a = a.astype(a.dtype.newbyteorder("<"))
    return ["array", a.dtype.str, list(a.shape), base64.b64encode(a.tobytes()).decode()]


def _sequence(items, depth: int) -> list:
    """["seq", the first MAX_ITEMS items] and, for a longer one, ["rest", how many more, sha256 of their encodings]."""
    import hashlib
    import itertools

    items = iter(items)
    out = ["seq", [encode(v, depth + 1) for v in itertools.islice(items, MAX_ITEMS)]]
    digest, more = hashlib.sha256(), 0
    for v in itertools.islice(items, MAX_REST):
        digest.update(json.dumps(encode(v, depth + 1)).encode())
        more += 1
    return out + [["rest", more, digest.hexdigest()]] if more else out


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
    if isinstance(value, type):
        return ["object", f"class {value.__qualname__}"]
    if callable(value) and not hasattr(value, "state_dict"):
        return ["callable"]  # judged by what it returns: the checks' calls of it are recorded (wrap_returned)
    if isinstance(value, (types.GeneratorType, range)) or type(value).__name__ in ("map", "filter", "zip"):
        return _sequence(value, depth)
    module = type(value).__module__
    if module.startswith(("torch", "numpy")) and hasattr(value, "shape") and hasattr(value, "dtype"):
        if module.startswith("numpy") and value.shape == ():
            return encode(value.item(), depth + 1)
        return _array(value)
    if isinstance(value, (tuple, list)) or type(value).__name__ == "Size":
        return _sequence(value, depth)
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


def write_json(path: str, data) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(data, f)
    os.replace(path + ".tmp", path)
