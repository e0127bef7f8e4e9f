"""What an experiment notebook found, for its first screen: each of its claims as judged by the committed reference run
(results/claims.json), one panel per claim with the effect and its interval, and one plain sentence per claim."""

from __future__ import annotations

import json
from pathlib import Path

from .forest import COLOURS, interval

HOW_SURE = {  # what a verdict says about its interval, in a few words
    "reproduced": "the whole interval lies on the paper's side of zero",
    "contradicted": "the whole interval lies on the other side of zero",
    "inconclusive": "the interval includes zero: these seeds cannot tell",
    "demonstration": "a demonstration: the design could not have come out otherwise",
    "not tested": "not tested: the two arms turned out to be one condition",
}
HOW_SURE_EQUAL = {  # the same for a claim of equality, judged against its margin
    "reproduced": "the whole interval lies inside the margin",
    "contradicted": "the whole interval lies outside the margin",
    "inconclusive": "the interval is neither inside nor outside the margin: these seeds cannot tell",
}


def notebook_claims(notebook: str, results: str | Path = "../results") -> list[dict]:
    """The claims.json entries of `notebook` ('08_data_size' or its number '08'), in the report's order."""
    path = Path(results) / "claims.json"
    if not path.exists():
        raise FileNotFoundError(f"no claims report at {path}: run `python scripts/claims_report.py` first.")
    claims = [c for c in json.loads(path.read_text())["claims"] if c["notebook"].startswith(notebook)]
    if not claims:
        raise ValueError(f"{path} holds no claim of notebook {notebook!r}.")
    return claims


def _scale(claim: dict) -> str | None:
    return next((s for s in ("reference", "quick") if claim.get(s)), None)


def sentence(claim: dict) -> str:
    """One line: the claim, the verdict of its biggest committed run, its interval and how sure that is."""
    scale = _scale(claim)
    if scale is None:
        return f"- **{claim['id']}** {claim['claim']}: not run yet."
    found, verdict = claim[scale], claim[scale]["verdict"]
    effect, low, high = interval(found)
    margin = found["ours"].get("margin")
    how = (HOW_SURE_EQUAL if margin and verdict in HOW_SURE_EQUAL else HOW_SURE).get(verdict, verdict)
    if found.get("before_holm"):  # its own interval decided, the family of the scale's claims did not
        holm = found["ours"]["p_holm"]
        how = f"{found['before_holm']} by its own interval, but not after Holm's correction (Holm p {holm:.2g})"
    elif found["ours"].get("p_holm") is not None and verdict in ("reproduced", "contradicted"):
        how += f", and survives Holm's correction (Holm p {found['ours']['p_holm']:.2g})"
    within = f", margin ±{margin:g}" if margin else ""
    level = found["ours"].get("level", 0.95)
    if (
        verdict == "inconclusive" and not found.get("before_holm") and found["ours"].get("detectable") is not None
    ):  # how small an effect it could see
        what = "a margin of" if margin else "effects of"
        how += f"; the design shows {what} {found['ours']['detectable']:.3f} or more with 80 % power"
    return (
        f"- **{claim['id']}** {claim['claim']}: **{verdict}**, difference {effect:+.3f} ({level:.0%} interval "
        f"[{low:+.3f}, {high:+.3f}]{within}): {how} ({scale} run, {found['seeds']} seeds)."
    )


def finding_figure(claims: list[dict]):
    """One row per claim: the committed run's effect with its interval, zero marked (and an equality margin)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(claims), 1, figsize=(9, 0.85 * len(claims) + 0.5), squeeze=False)
    for ax, claim in zip(axes[:, 0], claims):
        scale = _scale(claim)
        ax.axvline(0, color="black", lw=0.8)
        ax.set_yticks([])
        label = claim["claim"] if len(claim["claim"]) <= 70 else claim["claim"][:67] + "..."
        ax.set_title(f"{claim['id']}: {label}", fontsize=9, loc="left")
        if scale is None:
            ax.text(0.5, 0.5, "not run yet", transform=ax.transAxes, ha="center", va="center")
            continue
        found = claim[scale]
        effect, low, high = interval(found)
        if found["ours"].get("margin"):
            m = found["ours"]["margin"]
            ax.axvspan(-m, m, color="#4575b4", alpha=0.15, lw=0)
        colour = COLOURS.get(found["verdict"], "black")
        ax.errorbar([effect], [0], xerr=[[effect - low], [high - effect]], fmt="o", color=colour, capsize=4, lw=2)
        ax.text(1.01, 0.5, f"{found['verdict']}\n({scale}, {found['seeds']} seeds)", transform=ax.transAxes,
                va="center", fontsize=8, color=colour)  # fmt: skip
        span = max(abs(low), abs(high), 1e-6)
        ax.set_xlim(-1.15 * span, 1.15 * span)
        ax.tick_params(axis="x", labelsize=7)
    axes[-1, 0].set_xlabel("effect in the claim's direction (0: no difference), with its interval", fontsize=8)
    fig.tight_layout()
    return fig


def show_finding(notebook: str, results: str | Path = "../results") -> None:
    """Display the notebook's finding: the figure, one sentence per claim and a link to the claims report."""
    import matplotlib.pyplot as plt
    from IPython.display import Markdown, display

    claims = notebook_claims(notebook, results)
    finding_figure(claims)
    plt.show()
    lines = [sentence(c) for c in claims]
    lines.append(
        "\nThe statistics behind each verdict are in the [claims report](../results/CLAIMS.md); your own run at quick "
        "is set beside these numbers at the end of this notebook."
    )
    display(Markdown("\n".join(lines)))
