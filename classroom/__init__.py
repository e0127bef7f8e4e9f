"""The course as graded assignments: student versions of the notebooks, a library assignment, and an autograder.

    python -m classroom release --out assignments/release
    python -m classroom grade SUBMISSIONS --out REPORTS

The instructor's notebooks stay the single source: exercises, solutions and checks are found by the cells' tags
(`exercise`, `solution`, `exercise-check`, `hidden-check`), points by `metadata.course.points` (default 1). Student
code runs only in a bubblewrap sandbox and only produces data; the verdicts are computed by the grader (verdict.py).
Nothing else in vitlib imports this package; of vitlib it uses only the helpers of `vitlib.utils` (grades.csv).
"""

from .check import answered_notebook, build_class, compare
from .library import starter_source
from .notebooks import Exercise, grading_notebook, leaked_solution_lines, parse_exercises, release_notebook
from .release import release_all
from .reports import write_reports
from .results import notebook_results
from .runner import ClassroomError, Options, grade_class

__all__ = [
    "ClassroomError",
    "Exercise",
    "Options",
    "answered_notebook",
    "build_class",
    "compare",
    "grade_class",
    "grading_notebook",
    "leaked_solution_lines",
    "notebook_results",
    "parse_exercises",
    "release_all",
    "release_notebook",
    "starter_source",
    "write_reports",
]
