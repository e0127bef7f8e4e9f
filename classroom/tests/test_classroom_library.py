"""The library assignment's rules, read from the syntax tree of the file as submitted (issue 61): every import form,
a method assigned after its class, names spelled in strings and code built at run time are seen; an honest file
breaks none."""

from classroom import library

SOLUTION = library.SOURCE.read_text()
SDPA = "\nimport torch.nn.functional as F\n"
SDPA += "MultiHeadSelfAttention.forward = lambda s, x: F.scaled_dot_product_attention(x, x, x)\n"


def test_the_solution_and_ordinary_calls_break_no_rule():
    assert library.rule_violations(SOLUTION) == {}
    assert library.rule_violations(SOLUTION + "\nmodel = VisionTransformer().eval()\nfast = torch.compile\n") == {}
    assert library.rule_violations("def patchify((:\n") == {}  # does not import: costs every exercise anyway


def test_every_import_form_of_vitlib_or_timm_is_seen():
    for line in ("import torch, vitlib", "from timm.layers import Mlp", "import vitlib.model as m",
                 "x = __import__('timm')", "def f():\n    import vitlib"):  # fmt: skip
        assert set(library.rule_violations(SOLUTION + "\n" + line + "\n")) == {"attention", "vit"}, line


def test_attention_by_a_library_call_anywhere_is_seen():
    assert library.rule_violations(SOLUTION + SDPA) == {"attention": library.ATTENTION_RULE}
    spelled = SOLUTION + "\nf = getattr(torch.nn.functional, 'scaled_dot_product_attention')\n"
    assert library.rule_violations(spelled) == {"attention": library.ATTENTION_RULE}
    assert "attention" in library.rule_violations(SOLUTION + "\nm = torch.nn.MultiheadAttention(8, 2)\n")


def test_code_built_at_run_time_is_refused():
    for line in ("exec('x = 1')", "m = __import__('vit' + 'lib')", "import importlib", "eval('2')"):
        assert library.rule_violations(SOLUTION + "\n" + line + "\n").get("vit") == library.DYNAMIC_RULE, line


def test_a_package_extension_or_bytecode_beside_the_file_is_refused(tmp_path):
    (tmp_path / library.FILENAME).write_text(SOLUTION)
    (tmp_path / "vit_from_scratch.py.bak").write_text("old")
    (tmp_path / "notes.md").write_text("mine")
    assert library.shadowing(tmp_path) is None
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "vit_from_scratch.cpython-312.pyc").write_bytes(b"\0")
    assert "__pycache__/" in library.shadowing(tmp_path)
    (tmp_path / "__pycache__" / "vit_from_scratch.cpython-312.pyc").unlink()
    (tmp_path / "vit_from_scratch").mkdir()
    assert library.shadowing(tmp_path).startswith("vit_from_scratch sits beside vit_from_scratch.py")


def test_blank_lines_before_a_solution_cost_no_more_than_the_lines():
    """issue 61: 40,000 blank lines made the old import regex take 9.4 s in the grader's own process; the syntax tree
    reads them in linear time (a generous bound: a regression to quadratic takes seconds)."""
    import time

    started = time.perf_counter()
    assert library.rule_violations("\n" * 40_000 + SOLUTION) == {}
    assert set(library.rule_violations("\n" * 40_000 + SOLUTION + "\nimport torch, vitlib\n")) == {"attention", "vit"}
    assert time.perf_counter() - started < 2.0
