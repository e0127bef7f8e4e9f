"""The claims report's picture: a forest plot, one small panel per claim, each scale's effect with its interval.

A panel's x axis is the claim's own measure (accuracy difference, attention distance, correlation, ...), so panels
are compared by where their intervals lie against zero (and against the margin of a claim of equality), not by
their widths. The interval is the one the verdict was judged by: the 95% t interval (90% for an equivalence) where
the run recorded it, else effect ± 2 standard errors (the earlier rule).
"""

from __future__ import annotations

import math
from pathlib import Path

COLOURS = {
    "reproduced": "#1a9850",
    "contradicted": "#d73027",
    "inconclusive": "#7f7f7f",
    "demonstration": "#8073ac",
    "not tested": "#bdbdbd",
}


def interval(found: dict) -> tuple[float, float, float]:
    """(effect, low, high) of one scale's result of a claim (a claims.json entry's scale)."""
    o = found["ours"]
    if o.get("low") is not None and o.get("high") is not None:
        return o["effect"], o["low"], o["high"]
    return o["effect"], o["effect"] - 2 * o["se"], o["effect"] + 2 * o["se"]


def forest_plot(content: dict, path: str | Path, columns: int = 4) -> Path:
    """Draw claims.json's `content` as a grid of panels (one per claim, a row per scale that has run it), saved to
    `path` (SVG or PNG by its suffix). Returns the path."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "vitlib"  # the same figure gives the same file
    claims, scales = content["claims"], content["scales"]
    rows = math.ceil(len(claims) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.4 * columns, 1.55 * rows + 0.6), squeeze=False)
    for ax, claim in zip(axes.flat, claims):
        _panel(ax, claim, scales)
    for ax in axes.flat[len(claims) :]:
        ax.axis("off")
    handles = [plt.Line2D([], [], color=c, marker="o", lw=2, label=v) for v, c in COLOURS.items()]
    fig.legend(handles=handles, loc="lower center", ncol=5, fontsize=10, frameon=False)
    fig.tight_layout(rect=(0, 0.025, 1, 1))
    path = Path(path)
    fig.savefig(path, metadata={"Date": None} if path.suffix == ".svg" else None)
    plt.close(fig)
    return path


def _panel(ax, claim: dict, scales: list[str]) -> None:
    from matplotlib.ticker import MaxNLocator

    ran = [(i, s, claim[s]) for i, s in enumerate(scales) if claim.get(s)]
    margin = next((f["ours"].get("margin") for _, _, f in ran if f["ours"].get("margin")), None)
    if margin:
        ax.axvspan(-margin, margin, color="#4575b4", alpha=0.12, lw=0)
    ax.axvline(0, color="black", lw=0.8)
    for i, _, found in ran:
        effect, low, high = interval(found)
        colour = COLOURS.get(found["verdict"], "black")
        ax.plot([low, high], [i, i], color=colour, lw=2)
        ax.plot([effect], [i], "o", color=colour, ms=4)
    ax.set_yticks(range(len(scales)), scales, fontsize=9)
    ax.set_ylim(len(scales) - 0.5, -0.5)
    ax.tick_params(axis="x", labelsize=8)
    ax.xaxis.set_major_locator(MaxNLocator(5))
    text = claim["claim"] if len(claim["claim"]) <= 32 else claim["claim"][:30].rstrip() + "..."
    ax.set_title(f"{claim['id']} ({claim['notebook'][:2]}): {text}", fontsize=8.5, loc="left")
    if not ran:
        ax.text(0.5, 0.5, "not run yet", transform=ax.transAxes, ha="center", va="center", fontsize=9)
