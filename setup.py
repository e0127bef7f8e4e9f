"""The install extras (pyproject.toml holds everything else). They live here for one reason: the grader is a
distribution of its own in classroom/, so that a learner's install does not carry it, and `pip install -e
'.[classroom]'` must find it on this disk; a requirement can only name a folder by its absolute file URL."""

from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent

EXTRAS = {
    # what the notebooks need on top of vitlib and the course
    "notebooks": [
        "jupyterlab>=4",
        "ipykernel>=6",
        "ipywidgets>=8",  # tqdm.auto draws its progress bars as widgets in JupyterLab
        "papermill>=2.6",
        "scikit-image>=0.22",
    ],
    # the grader (python -m classroom, classroom/): it also needs bubblewrap (`apt-get install bubblewrap`)
    "classroom": [f"vit-classroom @ {(HERE / 'classroom').as_uri()}"],
    # the course's website (make site): Jupyter Book 1 builds offline; MathJax 3 served from the site itself
    "docs": ["jupyter-book>=1.0.4,<2", "sphinx-mathjax-offline>=0.0.2"],
}
# tests: pytest, nbval for the notebooks, timm for the interoperability tests, the website's build, Playwright to
# drive Chromium (JupyterLab and the website in a real browser)
EXTRAS["dev"] = [
    *EXTRAS["notebooks"],
    *EXTRAS["docs"],
    *EXTRAS["classroom"],
    "pytest>=8",
    "nbval>=0.11",
    "pytest-xdist>=3.5",
    "timm>=1.0",
    "pyyaml>=6",
    "ruff>=0.6",
    "playwright>=1.40",
]

setup(extras_require=EXTRAS)
