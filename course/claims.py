"""The claims report built from the runs' results, for the paper's claims listed in `course.paper_claims`
(re-exported here as `CLAIMS`).

Each experiment notebook judges some of these claims (`Experiment.claim(id, comparison)`) and saves them with its
results; `report` gathers what every scale has run (results/quick, results/reference, results/gpu for the full
presets) into results/claims.json and results/CLAIMS.md:

    python scripts/claims_report.py            # after the notebooks have written their results
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path

from vitlib.utils import write_json

from .forest import forest_plot
from .paper_claims import CLAIMS
from .stats import NOT_TESTED, TEST_FIELDS, detectable, holm, interval_text

SCALES = {"quick": "quick", "reference": "reference", "full": "gpu"}  # scale -> folder under results/
NEEDS_GPU = "not measured yet: needs a GPU"  # what the report says of a full preset no GPU has run
HOLM_LEVEL = 0.05  # a verdict must survive Holm's correction over its scale's claims at this level


def results_of(results: Path, scale: str) -> dict[str, dict]:
    """{claim id: what the scale's runs found}, read from results/<folder>/**/*.json (experiment files)."""
    found = {}
    folder = results / SCALES[scale]
    for path in sorted(folder.rglob("*.json")):
        if any(part.startswith(".") for part in path.relative_to(folder).parts):
            continue  # results being replaced (scripts/run_experiments.py's .<notebook>.new): not results yet
        try:
            data = json.loads(path.read_text())
        except ValueError as e:
            raise ValueError(f"{path}: not a readable results file ({e}); run its notebook again.") from None
        for v in data.get("verdicts", []) if isinstance(data, dict) else []:
            if v.get("id") not in CLAIMS:
                continue
            missing = [k for k in ("effect", "se", "compared", "verdict", "seeds") if k not in v]
            if missing:
                raise ValueError(
                    f"{path}: the verdict of {v['id']} lacks {', '.join(missing)}; run its notebook again."
                )
            if not all(isinstance(v[k], (int, float)) and math.isfinite(v[k]) for k in ("effect", "se")):
                raise ValueError(
                    f"{path}: the verdict of {v['id']} has effect {v['effect']} and se {v['se']}: a run diverged; "
                    f"run its notebook again (a smaller learning rate, or fewer steps)."
                )
            machine = data.get("gpu") or f"{data.get('cpu', '?')}, {data.get('threads', '?')} thread(s)"
            found[v["id"]] = {
                "ours": {
                    "effect": v["effect"],
                    "se": v["se"],
                    "margin": v.get("margin"),
                    "compared": v["compared"],
                    **{k: v[k] for k in TEST_FIELDS if v.get(k) is not None},
                },
                "verdict": v["verdict"],
                **({"measured": v["measured"]} if v.get("measured") else {}),
                "why": v.get("why", ""),
                "seeds": v["seeds"],
                "minutes": round(data.get("minutes", 0), 1),
                "machine": machine,
                "date": data.get("saved"),
                "source": str(path.relative_to(results)),
            }
    return found


RULE = (
    "reproduced: the 95% interval of the effect (Welch's t, or the paired t where the arms share seeds) lies wholly on "
    "the paper's side of zero; contradicted: wholly on the other side; inconclusive: neither. Equality claims: two "
    "one-sided tests, the 90% interval inside a margin stated before the run. Not tested: the run's design could not "
    "test the claim (its two arms turned out to be one condition), whatever the interval says; it is left out of "
    "Holm's correction. A verdict other than inconclusive must also survive Holm's correction over the tested claims "
    "of its scale (adjusted p < 0.05); the verdict before it is kept beside it. Results recorded before this rule "
    "say '2-SE rule': beyond 2 standard errors"
)


def judged(results: Path) -> dict[str, dict[str, dict]]:
    """{scale: {claim id: result}} as the report judges them: demonstrations apart, Holm's adjustment over the tested
    claims of each scale (a verdict that does not survive it reads inconclusive, the one before kept as
    `before_holm`), and each design's power (`detectable`)."""
    by_scale = {scale: results_of(results, scale) for scale in SCALES}
    for found in by_scale.values():
        for cid, f in found.items():
            if CLAIMS[cid].get("demonstration"):  # what the interval said is kept, as `measured`
                f["measured"], f["verdict"] = f["verdict"], "demonstration"
        tested = [
            f
            for f in found.values()
            if f["ours"].get("p") is not None and f["verdict"] not in ("demonstration", NOT_TESTED)
        ]
        for f, adjusted in zip(tested, holm([f["ours"]["p"] for f in tested])):
            f["ours"]["p_holm"] = adjusted
            if f["verdict"] in ("reproduced", "contradicted") and adjusted >= HOLM_LEVEL:
                f["before_holm"], f["verdict"] = f["verdict"], "inconclusive"
                f["why"] = (
                    f"{f['before_holm']} by its own interval (p {f['ours']['p']:.2g}), not after Holm's correction "
                    f"over the {len(tested)} claims of its scale (Holm {adjusted:.2g})"
                )
        for f in found.values():  # the power of each design: the smallest effect (or margin) it detects at 80 %
            o = f["ours"]
            o["detectable"] = detectable(o["se"], o.get("df"), o.get("margin"))
    return by_scale


def report(results: str | Path = "results") -> dict:
    """results/claims.json, results/CLAIMS.md and the forest plot results/claims_forest.svg from every scale's
    results as `judged` judges them; returns claims.json's content."""
    results = Path(results)
    by_scale = judged(results)
    claims = [
        {"id": cid, **spec, **{scale: by_scale[scale].get(cid) for scale in SCALES}} for cid, spec in CLAIMS.items()
    ]
    out = {
        "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "scales": list(SCALES),
        "rule": RULE,
        "claims": claims,
    }
    write_json(results / "claims.json", out)
    forest_plot(out, results / "claims_forest.svg")
    (results / "CLAIMS.md").write_text(markdown(out))
    return out


def _cell(found: dict | None, scale: str) -> str:
    if found is None:
        return NEEDS_GPU if scale == "full" else "not run yet"
    o = found["ours"]
    ours = interval_text(o)
    if o.get("p_holm") is not None:
        ours += f", Holm {o['p_holm']:.2g}"
    budget = f", {o['hit_budget'][0]} of {o['hit_budget'][1]} runs hit the budget" if o.get("hit_budget") else ""
    verdict = found["verdict"] + (f" (measured: {found['measured']})" if found.get("measured") else "")
    verdict += f" ({found['before_holm']} before Holm)" if found.get("before_holm") else ""
    return f"**{verdict}** {ours} ({found['seeds']} seeds{budget}, {found['minutes']:g} min)"


def markdown(content: dict) -> str:
    """The claims report: the forest plot, a table with a column per scale (verdict, effect with its interval or
    ± SE, p and Holm's p, seeds, minutes), then the paper's evidence and what each run compared."""
    lines = [
        "# The paper's claims, tested",
        "",
        f"Generated from the runs' results by `scripts/claims_report.py` ({content['generated']}). Rule: "
        f"{content['rule']}. Effects are differences of test accuracy (or of the measure the notebook names), "
        f"mean over seeds; [low, high] is the interval the verdict was judged by; Holm: the p-value adjusted for "
        f"testing every claim of that scale together.",
        "",
        "![Every claim's effect with its interval at each scale, coloured by verdict; the zero line, and the margin "
        "of an equality claim shaded](claims_forest.svg)",
        "",
        "| id | claim | quick (3 seeds: provisional) | reference | full |",
        "|---|---|---|---|---|",
    ]
    for c in content["claims"]:
        cells = [c["id"], c["claim"], *(_cell(c[s], s) for s in SCALES)]
        lines.append("| " + " | ".join(str(x).replace("|", "/") for x in cells) + " |")
    lines += ["", "Where the paper says it, the notebook that tests it, and the scale of the paper's evidence:", ""]
    lines += [f"- **{c['id']}** {c['paper']} ({c['notebook']}); evidence: {c['scale']}" for c in content["claims"]]
    lines += [
        "",
        "Not reproduced at any scale run so far: what was measured, and the scale of the paper's evidence:",
        "",
    ]
    for c in content["claims"]:
        runs = {scale: c[scale] for scale in SCALES if c[scale]}
        if runs and all(r["verdict"] not in ("reproduced", "demonstration") for r in runs.values()):
            found = "; ".join(
                f"{scale} {r['verdict']} ({r.get('why') or r['ours']['compared']})" for scale, r in runs.items()
            )
            gpu = "" if c["full"] else f" The `full` preset of {c['notebook']} tests it at a larger scale: {NEEDS_GPU}."
            lines.append(
                f"- **{c['id']}** {c['claim']}: {found}. The paper: {c['paper']}; its evidence: {c['scale']}.{gpu}"
            )
    lines += ["", "Demonstrations: runs whose outcome their design decides, kept apart from the verdicts:", ""]
    lines += [
        f"- **{c['id']}** {c['claim']}: {c['demonstration']}." for c in content["claims"] if c.get("demonstration")
    ]
    lines += [
        "",
        "Power: the smallest true effect each reference design finds with 80 % power (for a claim of "
        "equality, the smallest margin it can show when the arms are truly equal), beside the effect measured:",
        "",
    ]
    lines += [_power_line(c) for c in content["claims"] if c.get("reference")]
    lines += ["", "What each run compared (each arm: mean ± std over seeds), and on which machine:", ""]
    for c in content["claims"]:
        for scale in SCALES:
            if c[scale]:
                f = c[scale]
                lines.append(
                    f"- **{c['id']}**, {scale}: {f['ours']['compared']} — {f['machine']}, {f['date']} "
                    f"(`results/{f['source']}`)"
                )
    return "\n".join(lines) + "\n"


def _power_line(claim: dict) -> str:
    """One claim's reference power: what it can detect, and for an equality the seeds its margin needs."""
    found = claim["reference"]
    o, n = found["ours"], found["seeds"]
    line = f"- **{claim['id']}**: detects {o['detectable']:.3f} or more ({n} seeds); measured {o['effect']:+.3f}"
    if o.get("margin") and o["detectable"] > o["margin"]:  # seeds per arm: the SE falls as 1/sqrt(n), df = 2n - 2
        need = next(k for k in range(n, 10_000) if detectable(o["se"] * math.sqrt(n / k), 2 * k - 2, 1) <= o["margin"])
        line += f"; its margin ±{o['margin']:g} is below that: about {need} seeds per arm could show it"
    return line + "."


def scales_table(exp, notebook: str, results: str | Path = "../results") -> str:
    """This run's claims (an Experiment) beside the committed runs of the same notebook at the other scales
    (results/quick, results/reference, results/gpu), as Markdown: what a learner's run found, next to what a bigger
    run found."""
    results = Path(results)
    found = judged(results)
    lines = [
        "| claim | this run (before Holm) | quick (committed; 3 seeds: provisional) | reference (CPU) | full (GPU) |",
        "|---|---|---|---|---|",
    ]
    for v in exp.verdicts:
        here = f"**{v['verdict']}** {interval_text(v)}"
        others = [_cell(found[s].get(v["id"]), s) for s in SCALES]
        lines.append(f"| ({v['id']}) {v['claim']} | {here} | " + " | ".join(others) + " |")
    if not exp.verdicts:
        lines.append(f"| (no claims judged yet in {notebook}) | | | | |")
    return "\n".join(lines)
