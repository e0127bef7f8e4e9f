"""Running a notebook of the course in a test: papermill in notebooks/, with its results sent to a fresh folder."""

from __future__ import annotations

from pathlib import Path


def execute(path: Path, tmp_path: Path, params: dict, declared: dict) -> None:
    """Run the notebook at `path` with `params`; the executed copy and any results (`out`) go under tmp_path."""
    import papermill

    params = dict(params)
    if "out" in declared:
        params["out"] = str(tmp_path / "results")  # never write into results/ or runs/
    papermill.execute_notebook(
        str(path),
        str(tmp_path / path.name),
        parameters=params,
        cwd=str(path.parent),
        kernel_name="python3",
        progress_bar=False,
    )
