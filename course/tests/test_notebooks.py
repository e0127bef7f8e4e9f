"""Every notebook follows the course's conventions (the contents themselves are checked by nbval)."""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from course.notebook import declared_parameters, declared_ranges, out_of_range

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
IDS = [p.stem for p in NOTEBOOKS]


def load(path):
    return json.loads(path.read_text())


def code_cells(nb):
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def src(cell):
    return "".join(cell["source"])


def tags(cell):
    return cell.get("metadata", {}).get("tags", [])


def test_the_course_has_its_notebooks_in_order():
    numbers = [int(p.name[:2]) for p in NOTEBOOKS]
    assert numbers and numbers == sorted(set(numbers)), numbers


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_one_typed_documented_parameters_cell_then_the_check(path):
    cells = code_cells(load(path))
    tagged = [i for i, c in enumerate(cells) if "parameters" in tags(c)]
    assert len(tagged) == 1, f"{path.name}: expected one cell tagged 'parameters', found {len(tagged)}"
    cell = src(cells[tagged[0]])
    declared = declared_parameters(cell)
    assert declared, f"{path.name}: the parameters cell declares nothing"
    for line in cell.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            assert re.match(r"^\w+: [\w\[\], |]+ = .+  # \S", line), (
                f"{path.name}: parameter line not of the form 'name: type = value  # help': {line!r}"
            )
    for name, kind in declared.items():
        assert kind is not None, f"{path.name}: parameter {name} has no (known) type annotation"
    after = src(cells[tagged[0] + 1])
    assert "check_parameters(In, globals())" in after, f"{path.name}: the cell after the parameters must check them"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_numeric_parameter_has_a_range_that_holds_its_presets(path):
    """A range per number (checked before any work), and every value the course itself passes lies inside it."""
    nb = load(path)
    cell = src([c for c in code_cells(nb) if "parameters" in tags(c)][0])
    declared, ranges = declared_parameters(cell), declared_ranges(cell)
    namespace = {}
    exec(cell, namespace)
    for name, kind in declared.items():  # the course's list parameters are lists of numbers
        if kind in (int, float, list):
            assert name in ranges, f"{path.name}: numeric parameter {name!r} needs a range: '# [low, high] help'"
    meta = nb["metadata"].get("vitlib", {})
    runs = [("default", {n: namespace[n] for n in declared})] + [
        (f"variant {i}", v) for i, v in enumerate(meta.get("variants", []))
    ]
    runs += [("full_smoke", meta["full_smoke"])] if "full_smoke" in meta else []
    for label, values in runs:
        for name, value in values.items():
            if name in ranges:
                assert out_of_range(name, value, ranges[name]) is None, f"{path.name} {label}: {name}={value!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_committed_with_the_outputs_of_a_clean_run(path):
    nb = load(path)
    cells = code_cells(nb)
    counts = [c.get("execution_count") for c in cells if src(c).strip()]
    assert None not in counts, f"{path.name}: some code cells were not run; commit the notebook with its outputs"
    for c in cells:
        for out in c.get("outputs", []):
            assert out.get("output_type") != "error", (
                f"{path.name}: a committed cell ended in an error:\n{src(c)[:200]}"
            )
    assert nb["metadata"]["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_exercises_follow_the_solution_convention(path):
    cells = code_cells(load(path))
    solutions = [i for i, c in enumerate(cells) if "solution" in tags(c)]
    assert solutions, f"{path.name}: no exercises (a cell tagged 'solution')"
    for i in solutions:
        body = src(cells[i])
        assert body.startswith("# SOLUTION"), f"{path.name}: a solution cell must start with '# SOLUTION'"
        assert "exercise" in tags(cells[i - 1]), f"{path.name}: the cell before a solution must be tagged 'exercise'"
        assert "exercise-check" in tags(cells[i + 1]), (
            f"{path.name}: the cell after a solution must be tagged 'exercise-check'"
        )
        assert cells[i]["metadata"].get("jupyter", {}).get("source_hidden"), f"{path.name}: solutions are collapsed"
    for c in cells:
        if "exercise" in tags(c) or "exercise-check" in tags(c):
            ast.parse(src(c).replace("%matplotlib inline", ""))
    for c in cells:
        if "solution" not in tags(c):
            assert not src(c).startswith("# SOLUTION"), f"{path.name}: an untagged cell starts with '# SOLUTION'"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_running_a_solution_keeps_the_learners_answer(path):
    """A solution cell fills in only what is still a TODO (`if unanswered(...):`), so running the whole notebook
    never overwrites an answer."""
    for c in code_cells(load(path)):
        if "solution" in tags(c):
            body = src(c)
            assert "if unanswered(" in body, (
                f"{path.name}: a solution cell must be guarded by 'if unanswered(...)':\n{body}"
            )
            first = next(line for line in body.splitlines()[1:] if line.strip() and not line.lstrip().startswith("#"))
            assert first.startswith(("if unanswered(", "from ", "import ")), (
                f"{path.name}: a solution must not change anything before checking 'unanswered':\n{body}"
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_guard_checks_are_collapsed_and_teaching_checks_are_not(path):
    """Cells that only guard the notebook's tests (tag `guard`) are collapsed; so the story reads straight."""
    for c in code_cells(load(path)):
        hidden = c.get("metadata", {}).get("jupyter", {}).get("source_hidden", False)
        if "guard" in tags(c):
            assert hidden, f"{path.name}: a guard cell must be collapsed (metadata.jupyter.source_hidden):\n{src(c)}"
        elif hidden:
            assert "solution" in tags(c), f"{path.name}: only guards and solutions are collapsed:\n{src(c)[:200]}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_notebook_checks_outputs_and_cites_the_paper(path):
    nb = load(path)
    assert any(src(c).startswith("# NBVAL_CHECK_OUTPUT") for c in code_cells(nb)), (
        f"{path.name}: nothing checked by nbval"
    )
    markdown = " ".join(src(c) for c in nb["cells"] if c["cell_type"] == "markdown")
    assert re.search(r"§\s?\d|eq\. \(\d\)|Table \d|Fig(ure|\.) \d|[Aa]ppendix", markdown), (
        f"{path.name}: cite the paper"
    )


def test_a_misspelt_parameter_stops_the_run(tmp_path):
    """Papermill only warns about an unknown parameter; the course's check stops the notebook (fast: it fails early)."""
    nb = NOTEBOOKS[0]
    declared = declared_parameters(src([c for c in code_cells(load(nb)) if "parameters" in tags(c)][0]))
    name = next(iter(declared))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "papermill",
            str(nb),
            str(tmp_path / "out.ipynb"),
            "--cwd",
            str(nb.parent),
            "-p",
            name + "x",
            "1",
            "-k",
            "python3",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode != 0
    assert f"unknown parameter '{name}x'" in run.stderr + run.stdout


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_papermill_documents_every_parameter(path):
    """`papermill --help-notebook` lists a parameter only when its line parses (one '=' only: none in the help)."""
    import papermill

    declared = declared_parameters(src([c for c in code_cells(load(path)) if "parameters" in tags(c)][0]))
    seen = papermill.inspect_notebook(str(path))
    assert set(seen) == set(declared), f"{path.name}: papermill cannot read {sorted(set(declared) - set(seen))}"
    assert all(seen[name]["help"] for name in seen), f"{path.name}: a parameter without help"


def resolves(name: str) -> bool:
    """Whether a dotted name such as 'course.stats.t_interval' is a module, or a module's attribute."""
    import importlib

    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            if not hasattr(obj, part):
                return False
            obj = getattr(obj, part)
        return True
    return False


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_the_prose_names_modules_and_functions_that_exist(path):
    text = "".join(src(c) for c in load(path)["cells"] if c["cell_type"] == "markdown")
    names = sorted(set(re.findall(r"`(vitlib(?:\.[A-Za-z_]\w*)+)", text)))
    assert [n for n in names if not resolves(n)] == []


RESULTS = Path(__file__).resolve().parents[2] / "results"


def recorded_minutes(nb: dict, path: Path, scale: str) -> float | None:
    """What a preset's run took when its outputs were committed: quick, the notebook's own papermill run; reference,
    the longest experiment file under results/reference/<notebook>/ (None where nothing is recorded)."""
    if scale == "quick":
        seconds = nb["metadata"].get("papermill", {}).get("duration")
        return None if seconds is None else seconds / 60
    files = sorted((RESULTS / "reference" / path.stem).glob("*.json"))
    return max((json.loads(f.read_text())["minutes"] for f in files), default=None)


def close_to(stated: float, recorded: float) -> bool:
    """Whether a stated number of minutes is the recorded one: within a third of it or a minute."""
    return abs(stated - recorded) <= max(1.0, recorded / 3)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_the_time_a_preset_promises_is_the_time_it_took(path):
    """The preset's help ("quick: ... CPU ~3 min; reference: ... CPU ~21 min") against the committed runs' minutes:
    within a third or a minute. A preset whose run is committed must say how long it takes."""
    nb = load(path)
    cell = next(c for c in code_cells(nb) if "parameters" in tags(c))
    line = next((ln for ln in src(cell).splitlines() if ln.startswith("preset")), "")
    for scale in ("quick", "reference"):
        recorded = recorded_minutes(nb, path, scale)
        part = re.search(rf"\b{scale}:[^;]*", line)
        stated = re.search(r"CPU ~(\d+(?:\.\d+)?) min", part.group(0)) if part else None
        if recorded is None or (part is None and scale == "quick"):  # 00-07 have no presets: their quick is the run
            continue
        assert part, f"{path.name}: its reference run is committed; its preset's help does not describe it"
        assert stated, f"{path.name}: the {scale} preset's help does not say how long it took ({recorded:.1f} min)"
        minutes = float(stated.group(1))
        assert close_to(minutes, recorded), (
            f"{path.name}: the {scale} preset's help says ~{minutes:g} min; its committed run took {recorded:.1f} min"
        )


PRESET_NAME = re.compile(r"(?:`|\*\*)(quick|reference|full)(?:`|\*\*)")


def minutes_said(text: str) -> dict[str, list[str]]:
    """What a notebook's 'Parameters' text says each preset takes: the text from a preset's name (`quick` or
    **quick**) to the next preset's name, searched for 'N minutes' and 'a few minutes'."""
    marks = list(PRESET_NAME.finditer(text))
    said: dict[str, list[str]] = {}
    for mark, after in zip(marks, marks[1:] + [None]):
        part = text[mark.start() : after.start() if after else len(text)]
        said.setdefault(mark.group(1), []).extend(re.findall(r"(a few|\d+(?:\.\d+)?)\s+minutes", part))
    return said


def test_the_minutes_the_parameters_text_states_are_read_per_preset():
    text = "**quick** (about 1.5\nminutes), `reference` (about 40 minutes, 2 cores); `full`: a GPU, a few minutes."
    assert minutes_said(text) == {"quick": ["1.5"], "reference": ["40"], "full": ["a few"]}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_the_time_the_parameters_text_states_is_the_time_it_took(path):
    """As the help's "CPU ~N min", the 'Parameters' text's "about N minutes" for quick and reference against the
    committed runs' minutes (within a third or a minute); "a few minutes" only for a run of at most five."""
    nb = load(path)
    markdown = [src(c) for c in nb["cells"] if c["cell_type"] == "markdown"]
    text = next((t for t in markdown if t.startswith("### Parameters")), "")
    for scale, stated in minutes_said(text).items():
        recorded = None if scale == "full" else recorded_minutes(nb, path, scale)  # full: no committed CPU run
        if recorded is None:
            continue
        for said in stated:
            if said == "a few":
                assert recorded <= 5, f"{path.name}: its {scale} preset takes {recorded:.1f} min, not 'a few minutes'"
            else:
                assert close_to(float(said), recorded), (
                    f"{path.name}: its Parameters text says the {scale} preset takes {said} minutes; its committed "
                    f"run took {recorded:.1f} min"
                )


MAX_CELL_WORDS = 300
WORDS_CEILING = 35_000  # the course budget (issue 59): 63,810 words before the cuts


def test_the_course_keeps_its_word_budget():
    """No markdown cell over 300 words, and the course's markdown under its ceiling (words: runs of non-space)."""
    total, long = 0, []
    for path in NOTEBOOKS:
        for k, cell in enumerate(load(path)["cells"]):
            if cell["cell_type"] == "markdown":
                words = len(re.findall(r"\S+", "".join(cell["source"])))
                total += words
                if words > MAX_CELL_WORDS:
                    long.append(f"{path.name} cell {k}: {words} words")
    assert not long, f"markdown cells over {MAX_CELL_WORDS} words (split or cut them): {long}"
    assert total <= WORDS_CEILING, f"the course's markdown is {total:,} words, over its ceiling of {WORDS_CEILING:,}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_question_ids_name_their_notebook(path):
    """A question's id ('12-q1') starts with its notebook's number (a renumbered notebook keeps no old ids)."""
    ids = re.findall(r'check_answer\("(\d\d)-q\d+"', "\n".join("".join(c["source"]) for c in load(path)["cells"]))
    assert all(i == path.name[:2] for i in ids), f"{path.name}: question ids {ids}"
