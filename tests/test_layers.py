"""The layout: vitlib is model <- data <- objectives <- train <- analysis, nothing importing from a layer above it; the
course (course/) and the grader (classroom/) import vitlib and vitlib imports neither; no import circle (imports
inside functions included); small modules and functions in all three."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("vitlib", "course", "classroom")
# the layer of each part; a module may import from its own layer and the ones below
LAYERS = {
    "vitlib._version": 0,
    "vitlib.utils": 0,
    "vitlib.model": 1,
    "vitlib.data": 2,
    "vitlib.objectives": 3,
    "vitlib.train": 4,
    "vitlib.analysis": 5,
    "vitlib": 6,
    "course": 7,  # the course built on vitlib
    "classroom": 8,  # the grader: the course as graded assignments; nothing imports it
}
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 330, 60
# The library a learner reads in an afternoon: 12,187 lines before the course and the grader left it; the goal is
# 5,000. This ceiling is its size today (5,775 lines), so that it cannot grow back unnoticed.
VITLIB_LINES = 5000


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> int:
    return max((v for k, v in LAYERS.items() if module == k or module.startswith(k + ".")), default=-1)


def modules(packages=PACKAGES) -> dict[str, Path]:
    """Every module of the packages, their tests, the instructor's material and build folders left out."""
    paths = [p for name in packages for p in sorted((ROOT / name).rglob("*.py"))]
    skip = {"tests", "instructor", "build"}
    return {module_name(p): p for p in paths if not skip & set(p.relative_to(ROOT).parts)}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Every vitlib module `name` imports, at the top or inside a function; `from .x import y` counts as x.y when
    x.y is a module, else as x."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] in PACKAGES}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            if base.split(".")[0] not in PACKAGES:
                continue
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return found - {name}


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports_of(name, path, set(mods)) for name, path in mods.items()}


def test_every_module_has_a_layer(graph):
    assert all(layer(m) >= 0 for m in graph), [m for m in graph if layer(m) < 0]


def test_no_module_imports_from_a_layer_above_it(graph):
    wrong = [(m, t) for m, targets in graph.items() for t in targets if layer(t) > layer(m)]
    assert not wrong, f"imports from a layer above: {wrong}"
    # the engine uses the objectives, never the other way round
    assert not [(m, t) for m, ts in graph.items() for t in ts if m.startswith("vitlib.objectives") and "train" in t]


def test_vitlib_imports_neither_the_course_nor_the_grader(graph):
    wrong = [(m, t) for m, ts in graph.items() if m.startswith("vitlib") for t in ts if not t.startswith("vitlib")]
    assert not wrong, f"vitlib imports from outside itself: {wrong}"
    assert not [(m, t) for m, ts in graph.items() if m.startswith("course") for t in ts if t.startswith("classroom")]


def test_vitlib_is_small_enough_to_read():
    lines = sum(len(p.read_text().splitlines()) for p in modules(("vitlib",)).values())
    assert lines <= VITLIB_LINES, f"vitlib is {lines} lines, over {VITLIB_LINES}: move what the course needs to course/"


def find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """A path of imports that comes back to where it started, or None (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if state.get(nxt) != 2 and (circle := visit(nxt, path + [nxt])):
                return circle
        state[node] = 2
        return None

    return next((c for start in sorted(graph) if start not in state and (c := visit(start, [start]))), None)


def test_no_import_circle(graph):
    assert find_circle(graph) is None, "import circle: " + " -> ".join(find_circle(graph))


def test_the_circle_check_finds_a_circle():
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_circle({"a": {"b"}, "b": set()}) is None


def oversized(paths: dict[str, Path]) -> list[str]:
    """Every module over MAX_MODULE_LINES lines and every function over MAX_FUNCTION_LINES, with its length."""
    found = []
    for name, path in sorted(paths.items()):
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            found.append(f"{name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{name}.{node.name}: {length} lines")
    return found


def test_modules_and_functions_fit_in_ones_head():
    offenders = oversized(modules())
    limits = f"over {MAX_MODULE_LINES} lines a module or {MAX_FUNCTION_LINES} a function"
    assert not offenders, f"{limits}: " + "; ".join(offenders)


def test_the_size_check_lists_every_offender(tmp_path):
    long_function = "def f():\n" + "    x = 1\n" * MAX_FUNCTION_LINES
    (tmp_path / "big.py").write_text("\n" * MAX_MODULE_LINES + "x = 1\n")
    (tmp_path / "long.py").write_text(long_function)
    (tmp_path / "fine.py").write_text("x = 1\n")
    found = oversized({p.stem: p for p in tmp_path.iterdir()})
    assert found == [f"big: {MAX_MODULE_LINES + 1} lines", f"long.f: {MAX_FUNCTION_LINES + 1} lines"]
