"""The instructor's answers as data: which names an exercise asks for, and the notebooks that record and collect them.

The instructor's notebook runs once per grading, in a sandbox of its own, with cells added around each exercise's
checks (capture.begin/hidden/end): it writes the expected values and the outputs of the answer functions on the
inputs the checks (visible and hidden) give them. A student's grading notebook gets one cell per exercise instead
(capture.answer) that writes the student's values and the student's functions' outputs on those same inputs.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat

from .notebooks import CHECK, HIDDEN, SOLUTION, Exercise, tags

HOME = "/home/student"
CLASSROOM = f"{HOME}/.classroom"
_IMPORT = f"__import__('sys').path.insert(0, {CLASSROOM!r}); _classroom_capture = __import__('capture')"


def key_file(exercise: Exercise) -> str:
    """The file name (without suffix) of an exercise's data: e<number>."""
    return f"e{exercise.number}"


def _parse(source: str):
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


def _defined(source: str) -> list[str]:
    """Names a cell binds at module level (inside if/with/for/try too, not inside functions or classes)."""
    tree, out = _parse(source), []

    def visit(body):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.append(node.name)
                continue
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    out.extend(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(node, field, None)
                if isinstance(inner, list):
                    visit(inner)

    visit(tree.body if tree else [])
    return out


def _used(source: str) -> set[str]:
    tree = _parse(source)
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} if tree else set()


def solution_cells(nb, exercise: Exercise) -> list:
    cells = []
    for cell in nb.cells[exercise.first_index :]:
        if CHECK in tags(cell) or HIDDEN in tags(cell):
            break
        if SOLUTION in tags(cell):
            cells.append(cell)
    return cells


def answer_names(nb, exercise: Exercise, extra_hidden: list[str] = ()) -> list[str]:
    """The names an exercise's solution defines that its exercise cells or its checks use: what is compared."""
    solved = [n for c in solution_cells(nb, exercise) for n in _defined(c.source)]
    stub = {n for c in nb.cells if c.get("id") in exercise.cell_ids for n in _defined(c.source)}
    checked = set().union(*(_used(c.source) for c in exercise.checks + exercise.hidden), *map(_used, extra_hidden))
    return list(dict.fromkeys(n for n in solved if n in stub | checked))


def _cell(source: str, cell_id: str, meta: dict):
    cell = nbformat.v4.new_code_cell(source)
    cell.id, cell.metadata["classroom"] = cell_id, meta
    return cell


def recording_notebook(nb, exercises: list[Exercise], names: dict, extra_hidden: dict):
    """The instructor's notebook with the recording cells around each exercise's checks (and the extra hidden checks
    of a private folder after its own)."""
    before, after = {}, {}
    for e in exercises:
        args = f"globals(), {key_file(e)!r}, {names[e.key]!r}"
        before.setdefault(id(e.checks[0]), []).append(
            _cell(f"_classroom_capture.begin({args})", f"rec-begin-{e.number}", {})
        )
        if e.hidden:
            before.setdefault(id(e.hidden[0]), []).append(
                _cell("_classroom_capture.hidden()", f"rec-hidden-{e.number}", {})
            )
        extra = [_cell(src, f"rec-extra-{e.number}-{k}", {}) for k, src in enumerate(extra_hidden.get(e.number, []))]
        if extra and not e.hidden:
            extra.insert(0, _cell("_classroom_capture.hidden()", f"rec-hidden-{e.number}", {}))
        end = _cell(f"_classroom_capture.end({args}, {CLASSROOM!r})", f"rec-end-{e.number}", {})
        after.setdefault(id((e.checks + e.hidden)[-1]), []).extend(extra + [end])
    cells = [_cell(_IMPORT, "classroom-record-setup", {"setup": True})]
    for cell in nb.cells:
        cells += before.get(id(cell), []) + [cell] + after.get(id(cell), [])
    out = nbformat.v4.new_notebook(metadata=dict(nb.metadata), cells=cells)
    out.metadata.pop("papermill", None)
    for k, cell in enumerate(out.cells):
        if not cell.get("id") or any(cell.get("id") == c.get("id") for c in out.cells[:k]):
            cell.id = f"cell-{k}"
    return out


def capture_cells(exercises: list[Exercise], names: dict) -> dict:
    """{exercise key: the source of the cell that collects a student's answers to it}."""
    return {
        e.key: f"{_IMPORT}\n_classroom_capture.answer(globals(), {key_file(e)!r}, {names[e.key]!r}, {CLASSROOM!r})"
        for e in exercises
    }


def extra_hidden_checks(folder: Path | None, notebook: str, exercises: list[Exercise]) -> dict[int, list[str]]:
    """Hidden checks kept outside the course: FOLDER/<notebook>/<exercise number>[-anything].py, one cell each."""
    if folder is None or not (folder / notebook).is_dir():
        return {}
    out = {}
    for path in sorted((folder / notebook).glob("*.py")):
        number = path.stem.split("-")[0]
        if not number.isdigit() or not any(e.number == int(number) for e in exercises):
            raise ValueError(f"{path}: name it <exercise number>.py (1 to {len(exercises)}), e.g. 2.py or 2-shapes.py")
        out.setdefault(int(number), []).append(path.read_text())
    return out
