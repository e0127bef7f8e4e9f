"""The paper's claims the course tests (and a few of follow-up work, marked "beyond the paper"), in one place, and
the claims report built from the runs' results.

Each experiment notebook judges some of these claims (`Experiment.claim(id, comparison)`) and saves them with its
results; `report` gathers what every scale has run (results/quick, results/reference, results/gpu for the full
presets) into results/claims.json and results/CLAIMS.md:

    python scripts/claims_report.py            # after the notebooks have written their results
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from ..utils import write_json
from .forest import forest_plot
from .stats import TEST_FIELDS, holm, interval_text

# id -> the paper's statement, where it is, and the notebook that tests it; `demonstration`: why the outcome is decided
# by the design (the run shows a mechanism; the report keeps it apart from the verdicts and from Holm's count)
CLAIMS = {
    "a1": dict(
        claim="ViT trails a ResNet of similar size when trained on little data",
        paper="§4.3, Fig. 3 (ImageNet only: below BiT), Fig. 4 (9M JFT images: ViT-B/32 much worse than ResNet50)",
        notebook="07_data_size",
    ),
    "a2": dict(
        claim="the ResNet's lead over ViT shrinks as the training set grows",
        paper="§4.3, Fig. 3-4 (ViT ahead from 90M JFT images on)",
        notebook="07_data_size",
    ),
    "a3": dict(
        claim="on a task that needs relations between distant patches, ViT gains more from data than a ResNet",
        paper="§3.1 (inductive bias), §4.3; a mechanism miniature, not an experiment of the paper",
        notebook="07_data_size",
        demonstration="a ResNet that ends in global average pooling cannot compare two distant glyphs, so the task "
        "decides which model gains: it shows the bet an inductive bias makes, it does not test the paper",
    ),
    "a4": dict(
        claim="in a few-shot linear probe of the frozen features, ViT trails a ResNet of similar size when trained on "
        "little data",
        paper="§4.3, Fig. 4 (linear 5-shot ImageNet of models pre-trained on JFT subsets: ViT-B/32 much worse than "
        "ResNet50 at 9M images, better from 90M on)",
        notebook="07_data_size",
    ),
    "b1": dict(
        claim="without position embeddings ViT does worse",
        paper="App. D.4, Table 8 (0.614 vs 0.642)",
        notebook="08_position_embeddings",
    ),
    "b2": dict(
        claim="1D, 2D and relative position embeddings work about equally well",
        paper="App. D.4, Table 8 (0.642, 0.640, 0.640)",
        notebook="08_position_embeddings",
    ),
    "c1": dict(
        claim="the [class] token and global average pooling work about equally well, each at its own learning rate",
        paper="App. D.3, Fig. 9",
        notebook="10_class_token_and_norm",
    ),
    "c2": dict(
        claim="GAP at the [class] token's learning rate does worse than at its own",
        paper="App. D.3, Fig. 9 (GAP needs a different learning rate)",
        notebook="10_class_token_and_norm",
    ),
    "d1": dict(
        claim="the mean attention distance grows with depth",
        paper="§4.5, Fig. 7 (right), App. D.7",
        notebook="13_inspecting_vit",
    ),
    "d2": dict(
        claim="some heads attend globally already in the lowest layer, while others are local (tested as: layer 1's "
        "most local head attends within half the uniform distance, its most global head beyond three quarters of it)",
        paper="§4.5, Fig. 7 (right)",
        notebook="13_inspecting_vit",
    ),
    "e1": dict(
        claim="learned position embeddings encode distance: closer patches have more similar embeddings",
        paper="§4.5, Fig. 7 (center), App. D.4 Fig. 10",
        notebook="13_inspecting_vit",
    ),
    "e2": dict(
        claim="learned position embeddings show a row-column structure",
        paper="§4.5, Fig. 7 (center)",
        notebook="13_inspecting_vit",
    ),
    "f1": dict(
        claim="fine-tuning at a higher resolution than pre-training (E_pos interpolated in 2D) helps",
        paper="§3.2, App. B.1.1 (pre-trained at 224, fine-tuned at a higher resolution)",
        notebook="11_finetune_resolution",
    ),
    "g1": dict(claim="hybrids beat the pure ViT at small compute", paper="§4.4, Fig. 5", notebook="12_hybrid"),
    "g2": dict(claim="the hybrid's advantage shrinks as compute grows", paper="§4.4, Fig. 5", notebook="12_hybrid"),
    "g3": dict(
        claim="the highly local attention of the pure ViT's lowest layer is less pronounced in the hybrid (tested as: "
        "layer 1's most local head over the uniform-attention distance, hybrid minus ViT)",
        paper="§4.5, Fig. 7 (right), App. D.7",
        notebook="12_hybrid",
    ),
    "g4": dict(
        claim="at equal training compute ViT beats a ResNet of its size",
        paper="§4.4, Fig. 5 (ViT needs about 2-4x less pre-training compute than ResNets for the same accuracy)",
        notebook="12_hybrid",
    ),
    "h1": dict(
        claim="masked patch prediction pre-training beats training from scratch",
        paper="§4.6 (ViT-B/16 79.9% on ImageNet, +2% over scratch)",
        notebook="14_self_supervision",
    ),
    "h2": dict(
        claim="masked patch prediction trails supervised pre-training",
        paper="§4.6 (4% behind supervised pre-training)",
        notebook="14_self_supervision",
    ),
    "i1": dict(
        claim="smaller patches (longer sequences) give better accuracy, for more compute",
        paper="§3.1, §4.1, Table 5 (/14 and /16 vs /32), Fig. 8",
        notebook="09_patch_size_and_shape",
    ),
    "k1": dict(
        claim="scaling depth helps more than scaling width",
        paper="App. D.2, Fig. 8",
        notebook="09_patch_size_and_shape",
    ),
    "x1": dict(
        claim="with LayerNorm before every block (pre-LN), a deep ViT trains where the original post-LN "
        "Transformer fails without a learning-rate warm-up",
        paper="§3.1 (LN before every block, after Wang et al. 2019 and Baevski & Auli 2019): the paper's "
        "design choice, tested",
        notebook="10_class_token_and_norm",
    ),
    "m1": dict(
        claim="MAE pre-training beats training from scratch",
        paper="beyond the paper: He et al. 2021 (MAE), the seeds' pointer after §4.6",
        notebook="14_self_supervision",
    ),
    "p1": dict(
        claim="pre-training on one task, then fine-tuning on another, beats training the second from scratch",
        paper="§4.1-4.2, Table 2 (transfer after pre-training)",
        notebook="15_pretraining",
    ),
    "o1": dict(
        claim="Adam pre-trains ResNets better than SGD with momentum (read by transfer to another task)",
        paper="App. D.1, Table 7 (ResNet-50/152 on JFT: Adam slightly ahead on average)",
        notebook="15_pretraining",
    ),
    "q1": dict(
        claim="ViT has little image-specific inductive bias: a fixed shuffle of the patches costs a CNN more "
        "accuracy than it costs ViT",
        paper="§3.1 (inductive bias: locality and 2D structure are built into every CNN layer, not into ViT's)",
        notebook="16_inductive_biases",
    ),
    "q2": dict(
        claim="a fixed shuffle of the patches leaves ViT's accuracy unchanged: its position embeddings learn "
        "every spatial relation from scratch",
        paper="§3.1 ('all spatial relations between the patches have to be learned from scratch')",
        notebook="16_inductive_biases",
        demonstration="a fixed permutation of whole patches only renames the rows of E_pos (notebook 16 proves it: the "
        "shuffled model equals the unshuffled one with E_pos's rows permuted), so the arms agree by construction",
    ),
    "t1": dict(
        claim="a dense loss on every patch token (token labelling, targets from a teacher) beats the [class]-only loss",
        paper="beyond the paper: Jiang et al. 2021 ('All Tokens Matter', LV-ViT), the seeds' pointer",
        notebook="17_token_labelling",
    ),
    "n1": dict(
        claim="self-distillation without labels (DINO) gives features whose k-NN accuracy beats the raw pixels'",
        paper="beyond the paper: Caron et al. 2021 ('Emerging properties', DINO), k-NN evaluation; the seeds' pointer",
        notebook="18_dino",
    ),
    "n2": dict(
        claim="DINO's [class] attention falls on the object more than a supervised ViT's",
        paper="beyond the paper: Caron et al. 2021, Fig. 1 and the attention-mask comparison with supervised ViT",
        notebook="18_dino",
    ),
}
SCALES = {"quick": "quick", "reference": "reference", "full": "gpu"}  # scale -> folder under results/


def results_of(results: Path, scale: str) -> dict[str, dict]:
    """{claim id: what the scale's runs found}, read from results/<folder>/**/*.json (experiment files)."""
    found = {}
    for path in sorted((results / SCALES[scale]).rglob("*.json")):
        data = json.loads(path.read_text())
        for v in data.get("verdicts", []) if isinstance(data, dict) else []:
            if v.get("id") in CLAIMS:
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
    "one-sided tests, the 90% interval inside a margin stated before the run. Results recorded before this rule say "
    "'2-SE rule': beyond 2 standard errors"
)


def report(results: str | Path = "results") -> dict:
    """results/claims.json, results/CLAIMS.md and the forest plot results/claims_forest.svg from every scale's
    results, with Holm's adjustment over the claims of each scale that have a p-value; returns claims.json's content."""
    results = Path(results)
    by_scale = {scale: results_of(results, scale) for scale in SCALES}
    for found in by_scale.values():
        for cid, f in found.items():
            if CLAIMS[cid].get("demonstration"):  # what the interval said is kept, as `measured`
                f["measured"], f["verdict"] = f["verdict"], "demonstration"
        tested = [f for f in found.values() if f["ours"].get("p") is not None and f["verdict"] != "demonstration"]
        for f, adjusted in zip(tested, holm([f["ours"]["p"] for f in tested])):
            f["ours"]["p_holm"] = adjusted
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
        return "not measured yet: needs a GPU" if scale == "full" else "not run yet"
    o = found["ours"]
    ours = interval_text(o)
    if o.get("p_holm") is not None:
        ours += f", Holm {o['p_holm']:.2g}"
    budget = f", {o['hit_budget'][0]} of {o['hit_budget'][1]} runs hit the budget" if o.get("hit_budget") else ""
    verdict = found["verdict"] + (f" (measured: {found['measured']})" if found.get("measured") else "")
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
    lines += ["", "Where the paper says it, and the notebook that tests it:", ""]
    lines += [f"- **{c['id']}** {c['paper']} ({c['notebook']})" for c in content["claims"]]
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
            lines.append(f"- **{c['id']}** {c['claim']}: {found}. The paper: {c['paper']}.")
    lines += ["", "Demonstrations: runs whose outcome their design decides, kept apart from the verdicts:", ""]
    lines += [
        f"- **{c['id']}** {c['claim']}: {c['demonstration']}." for c in content["claims"] if c.get("demonstration")
    ]
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


def scales_table(exp, notebook: str, results: str | Path = "../results") -> str:
    """This run's claims (an Experiment) beside the committed runs of the same notebook at the other scales
    (results/quick, results/reference, results/gpu), as Markdown: what a learner's run found, next to what a bigger
    run found."""
    results = Path(results)
    found = {scale: results_of(results, scale) for scale in SCALES}
    lines = [
        "| claim | this run | quick (committed; 3 seeds: provisional) | reference (CPU) | full (GPU) |",
        "|---|---|---|---|---|",
    ]
    for v in exp.verdicts:
        here = f"**{v['verdict']}** {interval_text(v)}"
        others = [_cell(found[s].get(v["id"]), s) for s in SCALES]
        lines.append(f"| ({v['id']}) {v['claim']} | {here} | " + " | ".join(others) + " |")
    if not exp.verdicts:
        lines.append(f"| (no claims judged yet in {notebook}) | | | | |")
    return "\n".join(lines)
