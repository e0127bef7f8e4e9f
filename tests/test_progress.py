"""vitlib.train.metrics.progress_bar: a notebook saved after a run shows its finished bar, not its first state."""

import nbformat
from nbclient import NotebookClient

from vitlib.train.metrics import close_bar, progress_bar

CELL = """
from vitlib.train.metrics import close_bar, progress_bar
bar = progress_bar(total=3, desc="run", unit="step")
for _ in range(3):
    bar.update()
close_bar(bar)
"""


def test_text_bar_outside_a_notebook(capsys):
    bar = progress_bar(total=2, desc="run")
    bar.update(2)
    close_bar(bar)
    assert "2/2" in capsys.readouterr().err


def test_saved_notebook_shows_the_finished_bar(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(CELL)])
    NotebookClient(nb, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    shown = [o["data"]["text/plain"] for o in nb.cells[0].outputs if o["output_type"] == "display_data"]
    assert len(shown) == 1, nb.cells[0].outputs  # one bar, no second copy
    assert "3/3" in shown[0] and "0/3" not in shown[0], shown
