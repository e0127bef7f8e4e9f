"""Serve MathJax 3 from the website itself, so that the maths renders offline.

MathJax comes from the `sphinx-mathjax-offline` package (the `docs` extra); only the files that the `tex-chtml`
component loads are copied (the component, its TeX extensions, CommonHTML fonts, menu and accessibility parts), about
a tenth of the package. Sphinx's own mathjax extension then points at `_static/mathjax/tex-chtml.js`.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from sphinx.util.fileutil import copy_asset

PACKAGE = "sphinx-mathjax-offline"
ENTRY = "tex-chtml.js"
PARTS = (ENTRY, "input/tex/extensions", "output/chtml/fonts/woff-v2", "ui", "a11y")


def mathjax_source() -> Path:
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.origin:
        raise RuntimeError(
            f"MathJax not found: install the website's packages with pip install -e '.[docs]' "
            f"(it brings {PACKAGE}, which holds MathJax 3)"
        )
    source = Path(spec.origin).parent / "static" / "mathjax"
    missing = [p for p in PARTS if not (source / p).exists()]
    if missing:
        raise RuntimeError(f"{PACKAGE} at {source} lacks {missing}: reinstall it")
    return source


def copy_mathjax(app, exc) -> None:
    if exc is not None or app.builder.format != "html":
        return
    source, target = mathjax_source(), Path(app.outdir) / "_static" / "mathjax"
    for part in PARTS:
        if (source / part).is_dir():
            copy_asset(str(source / part), str(target / part))
        else:
            copy_asset(str(source / part), str((target / part).parent))


def use_local_mathjax(app, config) -> None:
    mathjax_source()  # fail at the start of the build, not after it
    config.mathjax_path = f"mathjax/{ENTRY}"


def setup(app):
    app.connect("config-inited", use_local_mathjax)
    app.connect("build-finished", copy_mathjax)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
