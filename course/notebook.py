"""Papermill parameters, checked: an unknown name or a wrongly typed value stops the notebook with a clear error.

Papermill only warns about a parameter the notebook does not declare and injects any value it is given. Call
`check_parameters(In, globals())` in the cell right after the `parameters` cell: it reads the declarations
(`name: type = default  # help`) from that cell's source and the names papermill injected (the cell that starts
with '# Parameters'), and returns the parameters as a dict.

A numeric parameter declares its range at the start of its help comment, `n: int = 4  # [1, 64] what it is`
(`inf` allowed; for a list, every element): a value outside it stops the run before any work, with the help text as
the reason, instead of failing later inside torch or running for an hour.
"""

from __future__ import annotations

import ast
import difflib
import io
import math
import re
import tokenize
import warnings

_TYPES = {"int": int, "float": float, "str": str, "bool": bool, "list": list, "dict": dict, "tuple": tuple}


class ParameterError(ValueError):
    """A papermill parameter the notebook does not declare, or a value of the wrong type."""


def declared_parameters(source: str) -> dict[str, type | None]:
    """Names and annotated types declared in a parameters cell (`name: type = value`)."""
    out = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            ann = ast.unparse(node.annotation)
            out[node.target.id] = _TYPES.get(ann.split("[")[0].split("|")[0].strip())
        elif isinstance(node, ast.Assign):
            out.update({t.id: None for t in node.targets if isinstance(t, ast.Name)})
    return out


_RANGE = re.compile(r"^\[\s*([^,\]]+?)\s*,\s*([^\]]+?)\s*\]\s*(.*)$")


def _bound(text: str) -> float:
    text = text.replace("_", "").strip()
    return float(text) if text.lstrip("-") == "inf" else float(ast.literal_eval(text))


def _shown(bound: float) -> str:
    return str(int(bound)) if math.isfinite(bound) and bound.is_integer() else repr(bound).replace("inf", "∞")


def declared_ranges(source: str) -> dict[str, tuple[float, float, str]]:
    """(low, high, help) of every parameter whose help comment starts with `[low, high]`."""
    comments = {
        tok.start[0]: tok.string.lstrip("#").strip()
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    }
    out = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.AnnAssign, ast.Assign)):
            target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
            match = _RANGE.match(comments.get(node.end_lineno, ""))
            if isinstance(target, ast.Name) and match:
                low, high = _bound(match[1]), _bound(match[2])
                if low > high:
                    raise ValueError(f"parameter {target.id!r}: its range [{match[1]}, {match[2]}] is empty.")
                out[target.id] = (low, high, match[3])
    return out


def out_of_range(name: str, value, bounds: tuple[float, float, str]) -> str | None:
    """The error message when `value` (a number, or each number of a list) is outside `bounds`, else None."""
    low, high, about = bounds
    values = value if isinstance(value, (list, tuple)) else [value]
    for v in values:
        if isinstance(v, (int, float)) and not isinstance(v, bool) and not low <= v <= high:
            shown = f"an element {v!r} of {value!r}" if values is value else repr(v)
            span = f"[{_shown(low)}, {_shown(high)}]"
            return (
                f"parameter {name!r} must be in {span}, got {shown}: {about}. A value outside the range would fail "
                f"later inside the run (or run far longer than any preset); pick one inside it."
            )
    return None


def assigned_names(source: str) -> list[str]:
    return [
        t.id
        for node in ast.parse(source).body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(t, ast.Name)
    ]


def _type_ok(value, expected: type) -> bool:
    if expected is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if expected is list:
        return isinstance(value, (list, tuple))
    return isinstance(value, expected)


def check_parameters(history: list[str], namespace: dict) -> dict:
    """Check the parameters of this run; `history` is IPython's `In`, `namespace` the notebook's `globals()`."""
    cells = [c for c in history if c.strip()]
    if not cells:  # nbval runs cells with store_history=False: In stays empty, and nothing was injected
        warnings.warn("the cell history is not recorded (as under nbval): parameters not checked", stacklevel=2)
        return {}
    # cells[-1] is the cell calling this; before it, papermill's injected cell (if any), before that the parameters cell
    injected = cells[-2] if len(cells) >= 2 and cells[-2].lstrip().startswith("# Parameters") else None
    before = (
        cells[:-2] if injected is not None else cells[:-1]
    )  # papermill injects at the top when there is no parameters cell
    params_src = before[-1] if before else ""
    try:
        declared = declared_parameters(params_src)
    except SyntaxError:
        declared = {}
    if not declared:
        raise ParameterError(
            "run the notebook's parameters cell right before this cell (it declares `name: type = value`)."
        )
    for name in assigned_names(injected) if injected else []:
        if name not in declared:
            close = difflib.get_close_matches(name, declared, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ParameterError(
                f"unknown parameter {name!r}.{hint} This notebook's parameters are: "
                + ", ".join(f"{n} ({t.__name__ if t else 'any'})" for n, t in declared.items())
                + ". See them with: papermill --help-notebook <notebook>."
            )
    ranges = declared_ranges(params_src)
    for name, expected in declared.items():
        value = namespace.get(name)
        if expected is not None and not _type_ok(value, expected):
            raise ParameterError(
                f"parameter {name!r} must be of type {expected.__name__}, got {value!r} "
                f"({type(value).__name__}). With papermill: -p {name} <value> (numbers are parsed), "
                f"or -r {name} <value> for a raw string."
            )
        message = out_of_range(name, value, ranges[name]) if name in ranges else None
        if message:
            raise ParameterError(message)
    return {name: namespace[name] for name in declared}
