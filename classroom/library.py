"""The library assignment: a ViT written from scratch in one file, graded by comparing outputs.

The instructor's folder (`classroom/instructor/` of the course, not part of the installed package; `--instructor DIR`
for a private copy) holds the solution `vit_from_scratch.py` with the answers between `# BEGIN SOLUTION` and
`# END SOLUTION`, the visible tests `test_vit_from_scratch.py` (released with the starter) and the hidden tests
`test_vit_from_scratch_hidden.py`. The grader runs both test files once on the solution, in a sandbox, recording every
call they make to the solution's functions and modules (inputs, weights, outputs); each student's file then runs in a
sandbox of its own only to compute its outputs on those inputs, and the grader compares them. A call belongs to the
exercise its test's name starts with (test_<exercise>_...); an exercise earns its points when all its calls match and
the rules below hold (checked on the syntax tree of the file as submitted, in the grader, before it runs).
"""

from __future__ import annotations

import ast
import os
import re
from importlib import machinery
from pathlib import Path

ASSIGNMENT = "vit_from_scratch"
FILENAME = ASSIGNMENT + ".py"


def instructor_dir() -> Path:
    """$CLASSROOM_INSTRUCTOR, else this package's instructor/ folder."""
    env = os.environ.get("CLASSROOM_INSTRUCTOR")
    return Path(env) if env else Path(__file__).resolve().parent / "instructor"


HERE = instructor_dir()
SOURCE = HERE / FILENAME
VISIBLE_TESTS = HERE / "test_vit_from_scratch.py"
HIDDEN_TESTS = HERE / "test_vit_from_scratch_hidden.py"
# (exercise = test name prefix, title, points)
EXERCISES = [
    ("patchify", "patchify: an image as a sequence of flattened patches", 1),
    ("patch_embedding", "PatchEmbedding.forward: x_p E", 1),
    ("attention", "MultiHeadSelfAttention.forward, written out", 1),
    ("block", "EncoderBlock.forward: the pre-LN block", 1),
    ("vit", "VisionTransformer.forward: eq. (1)-(4)", 1),
]
BEGIN, END = "# BEGIN SOLUTION", "# END SOLUTION"
# rules on the student's source, checked on its syntax tree before it runs (names anywhere in the file count: a
# method assigned after its class, `import torch, vitlib` and `__import__("vitlib")` are all seen)
FORBIDDEN_MODULES = {"vitlib", "timm"}
FORBIDDEN_ATTENTION = ("scaled_dot_product", "multiheadattention", "multi_head_attention")  # parts of names, any case
DYNAMIC = {"__import__", "exec", "eval", "compile", "import_module", "importlib"}  # code built while it runs
MAX_SOURCE_BYTES = 1_000_000  # a ViT from scratch is about 10 kB; the grader parses the file in its own process
ATTENTION_RULE = "write the softmax yourself: no scaled_dot_product_attention, nn.MultiheadAttention, vitlib or timm"
IMPORT_RULE = "vit_from_scratch.py must not import vitlib or timm"
DYNAMIC_RULE = "vit_from_scratch.py must not build code while it runs (exec, eval, compile, __import__, importlib)"


def starter_source(source: str, keep: set[str] = frozenset()) -> str:
    """The instructor source with every solution block replaced by `raise NotImplementedError("<where>: ...")`, except
    the blocks of the functions named in `keep` (e.g. "patchify", "PatchEmbedding.forward")."""
    out, inside, where, cls, keeping = [], False, "this function", None, False
    for number, line in enumerate(source.splitlines(), 1):
        stripped = line.strip()
        if not inside:
            m = re.match(r"(\s*)(class|def)\s+(\w+)", line)
            if m and m[2] == "class" and not m[1]:
                cls = m[3]
            elif m and m[2] == "def":
                where = f"{cls}.{m[3]}" if m[1] and cls else m[3]
                cls = cls if m[1] else None
        if stripped == BEGIN:
            if inside:
                raise ValueError(f"line {number}: {BEGIN} inside another solution block.")
            inside, keeping = True, where in keep
            indent = line[: len(line) - len(line.lstrip())]
            if not keeping:
                out.append(f'{indent}raise NotImplementedError("{where}: write your code here")')
        elif stripped == END:
            if not inside:
                raise ValueError(f"line {number}: {END} without {BEGIN}.")
            inside = False
        elif not inside or keeping:
            out.append(line)
    if inside:
        raise ValueError(f"a solution block is not closed by {END}.")
    return "\n".join(out) + "\n"


def solution_lines(source: str) -> list[str]:
    """Lines inside the solution blocks that appear nowhere else in the source (what must never be released)."""
    inside, lines, others = False, [], set()
    for line in source.splitlines():
        s = line.strip()
        if s in (BEGIN, END):
            inside = s == BEGIN
        elif inside:
            lines.append(s)
        else:
            others.add(s)
    return [s for s in lines if s and s not in others]


def release(out_dir: Path, folder: Path | None = None) -> list[Path]:
    """Write the starter file and the visible tests."""
    folder = folder or HERE
    if not (folder / FILENAME).is_file():
        raise ValueError(f"no {FILENAME} in {folder}: the library assignment's instructor folder (--instructor DIR)")
    source = (folder / FILENAME).read_text()
    starter = starter_source(source)
    leaked = [s for s in solution_lines(source) if s in {line.strip() for line in starter.splitlines()}]
    if leaked:
        raise ValueError(f"the starter would contain solution lines: {leaked[:3]}")
    (out_dir / FILENAME).write_text(starter)
    (out_dir / VISIBLE_TESTS.name).write_text((folder / VISIBLE_TESTS.name).read_text())
    return [out_dir / FILENAME, out_dir / VISIBLE_TESTS.name]


def exercise_of(test_name: str) -> str | None:
    name = test_name.removeprefix("test_")
    return next((key for key, _, _ in EXERCISES if name.startswith(key)), None)


def _names(tree: ast.AST) -> tuple[set[str], set[str], set[str], set[str]]:
    """(modules imported, names bound or read, attribute names, string constants) in a syntax tree."""
    modules, names, attributes, strings = set(), set(), set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.name.split(".")[0] for a in node.names}
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            modules.add((node.module or "").split(".")[0] if node.level == 0 else "")
            names |= {a.name for a in node.names} | {a.asname for a in node.names if a.asname}
        elif isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            attributes.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            strings.add(node.value)
    return modules, names, attributes, strings


def rule_violations(source: str) -> dict[str, str]:
    """{exercise: message} for the rules the student's source breaks, read from its syntax tree. A file that does not
    parse breaks none (its import fails, which costs every exercise)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # Python's own import fails the same way
        return {}
    modules, names, attributes, strings = _names(tree)
    strings = {s for s in strings if re.fullmatch(r"\w+(\.\w+)*", s)}  # a name spelled out: getattr(F, "...")
    spelled = {s.split(".")[0] for s in strings}  # __import__("vitlib")
    out = {}
    if (modules | spelled) & FORBIDDEN_MODULES:
        out = {"attention": ATTENTION_RULE, "vit": IMPORT_RULE}
    if any(part in word.lower() for word in names | attributes | strings for part in FORBIDDEN_ATTENTION):
        out.setdefault("attention", ATTENTION_RULE)
    if (names | modules | (attributes & {"import_module"})) & DYNAMIC:
        out.setdefault("vit", DYNAMIC_RULE)
    return out


def shadowing(folder: Path) -> str | None:
    """Why the file would not be what runs: a package, compiled module or cached bytecode of the same name beside it
    (Python imports those first)."""
    importable = {ASSIGNMENT} | {ASSIGNMENT + s for s in machinery.EXTENSION_SUFFIXES + machinery.BYTECODE_SUFFIXES}
    for entry in sorted(folder.iterdir()):
        if entry.name in importable:
            return f"{entry.name} sits beside {FILENAME} and would be imported instead: submit {FILENAME} alone"
    cache = folder / "__pycache__"
    if cache.is_dir() and any(p.name.startswith(ASSIGNMENT + ".") for p in cache.iterdir()):
        return (
            f"__pycache__/ holds compiled {ASSIGNMENT} files that would run instead of {FILENAME}: delete __pycache__"
        )
    return None
