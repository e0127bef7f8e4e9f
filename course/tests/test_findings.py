"""Each experiment notebook opens with its finding, read from results/claims.json (never typed)."""

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

from course.findings import finding_figure, notebook_claims, sentence

ROOT = Path(__file__).resolve().parents[2]
REPORT = json.loads((ROOT / "results" / "claims.json").read_text())
EXPERIMENTS = sorted({c["notebook"] for c in REPORT["claims"]})


def claim(verdict="reproduced", margin=None, low=0.01, high=0.05):
    ours = dict(effect=(low + high) / 2, se=0.01, low=low, high=high, level=0.9 if margin else 0.95, margin=margin,
                compared="A vs B")  # fmt: skip
    return {
        "id": "z1",
        "claim": "A beats B",
        "notebook": "99_x",
        "reference": dict(ours=ours, verdict=verdict, seeds=5),
    }


@pytest.mark.parametrize("notebook", EXPERIMENTS)
def test_every_experiment_notebook_opens_with_its_finding(notebook):
    cells = json.loads((ROOT / "notebooks" / f"{notebook}.ipynb").read_text())["cells"]
    first = next(i for i, c in enumerate(cells) if "show_finding(" in "".join(c["source"]))
    assert first <= 9, f"{notebook}: the finding comes at cell {first}, not on the first screen"
    assert f'show_finding("{notebook[:2]}")' in "".join(cells[first]["source"])
    assert any(o.get("data", {}).get("image/png") for o in cells[first]["outputs"]), "committed without its figure"
    lines = [sentence(c) for c in notebook_claims(notebook[:2], ROOT / "results")]
    shown = "".join("".join(o.get("data", {}).get("text/markdown", "")) for o in cells[first]["outputs"])
    assert all(line in shown for line in lines), f"{notebook}: the committed finding is not today's claims.json"


def test_the_sentence_reads_the_numbers_and_the_verdict():
    line = sentence(claim())
    assert "**reproduced**, difference +0.030 (95% interval [+0.010, +0.050])" in line
    assert "on the paper's side of zero" in line and "(reference run, 5 seeds)" in line
    equal = sentence(claim("inconclusive", margin=0.02, low=-0.01, high=0.03))
    assert "90% interval [-0.010, +0.030], margin ±0.02" in equal and "neither inside nor outside" in equal
    powered = claim("inconclusive", low=-0.01, high=0.03)
    powered["reference"]["ours"]["detectable"] = 0.047
    assert "these seeds cannot tell; the design shows effects of 0.047 or more with 80 % power" in sentence(powered)
    assert "not run yet" in sentence({"id": "z2", "claim": "C", "notebook": "99_x", "reference": None, "quick": None})


def test_one_panel_per_claim_with_its_interval():
    fig = finding_figure([claim(), claim("contradicted", low=-0.3, high=-0.1)])
    assert len(fig.axes) == 2
    (line,) = list(fig.axes[1].containers)  # the error bar
    assert line[0].get_xdata()[0] == pytest.approx(-0.2)
    plt.close(fig)


def test_a_missing_report_or_notebook_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="claims_report.py"):
        notebook_claims("08", tmp_path)
    with pytest.raises(ValueError, match="no claim of notebook '42'"):
        notebook_claims("42", ROOT / "results")
