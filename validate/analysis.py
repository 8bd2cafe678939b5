"""Numbers the validation report is made of: error statistics, rank agreement, error causes.

``error = (predicted − measured) / measured``: positive means the model predicts a slower
kernel than measured (pessimistic), negative a faster one (optimistic). Only rows with status
``ok`` and a prediction are compared. Pure Python (no numpy needed).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from statistics import median

#: |error| at or below which a row counts as "within target" (issue 4's first milestone).
TARGET_ABS_ERROR = 0.15
#: A factor whose spread is at least this share of the largest is reported as confounded.
TIE = 0.9
#: Workload properties the error is split by when looking for its main cause.
FACTORS = {"seqlen_q": "sequence length N", "causal": "causal vs non-causal masking",
           "head_dim": "head dimension d", "predicted_bound": "the unit the model binds on",
           "gqa": "GQA vs MHA"}


def _time(value) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)


def is_compared(rec: dict) -> bool:
    """Whether a record has a measurement and a prediction (status ok), both finite times
    > 0 (a NaN or a string is not a measurement)."""
    return bool(rec.get("status") == "ok" and _time(rec.get("predicted_s"))
                and _time(rec.get("measured_s")))


def compared(records) -> list[dict]:
    """Records with a measurement and a prediction (status ok)."""
    return [r for r in records if is_compared(r)]


def rel_error(rec: dict) -> float:
    return (rec["predicted_s"] - rec["measured_s"]) / rec["measured_s"]


def label(rec: dict) -> str:
    """Row group name: the kernel, plus the model it is compared with for external rows."""
    if rec.get("kind") == "external":
        return f"{rec['algorithm']} (vs {rec.get('model_name') or '?'} model)"
    return rec["algorithm"]


def error_stats(records) -> list[dict]:
    """Per (group, phase): row counts by status and the error statistics of compared rows."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in records:
        groups[(label(r), r.get("phase", "fwd"))].append(r)
    out = []
    for (name, phase), rows in groups.items():
        errs = [rel_error(r) for r in compared(rows)]
        stats = {"group": name, "phase": phase, "kind": rows[0].get("kind", "own"),
                 "rows": len(rows), "compared": len(errs),
                 "statuses": dict(Counter(r.get("status", "?") for r in rows))}
        if errs:
            abs_errs = [abs(e) for e in errs]
            stats.update(median_abs=median(abs_errs), max_abs=max(abs_errs),
                         median_signed=median(errs),
                         within_target=sum(e <= TARGET_ABS_ERROR for e in abs_errs))
        out.append(stats)
    return sorted(out, key=lambda s: (s["kind"] != "own", s["phase"], s["group"]))


def kendall_tau(a: list[float], b: list[float]) -> float | None:
    """Kendall's tau-b between two equally long sequences (None for fewer than 2 items or
    when one of them is constant)."""
    n = len(a)
    concordant = discordant = ties_a = ties_b = 0
    for i in range(n):
        for j in range(i + 1, n):
            da, db = a[i] - a[j], b[i] - b[j]
            if da == 0 and db == 0:
                continue
            if da == 0:
                ties_a += 1
            elif db == 0:
                ties_b += 1
            elif (da > 0) == (db > 0):
                concordant += 1
            else:
                discordant += 1
    denom = math.sqrt((concordant + discordant + ties_a) * (concordant + discordant + ties_b))
    return None if n < 2 or denom == 0 else (concordant - discordant) / denom


def rank_agreement(records) -> dict:
    """Per shape, do the model and the GPU order the own kernels the same way?

    Returns:
        ``shapes`` (per shape: kernels by predicted and by measured time, whether the fastest
        agrees, Kendall tau), ``fraction_fastest``, ``mean_tau``, ``n_shapes`` — over shapes
        with at least two compared own kernels.
    """
    by_shape: dict[str, list[dict]] = defaultdict(list)
    for r in compared(records):
        if r.get("kind", "own") == "own":
            by_shape[r["key"].split("|")[0]].append(r)
    shapes = []
    for key, rows in by_shape.items():
        if len(rows) < 2:
            continue
        pred = sorted(rows, key=lambda r: r["predicted_s"])
        meas = sorted(rows, key=lambda r: r["measured_s"])
        tau = kendall_tau([r["predicted_s"] for r in rows], [r["measured_s"] for r in rows])
        shapes.append({"shape": key, "row": rows[0], "n": len(rows),
                       "predicted_order": [r["algorithm"] for r in pred],
                       "measured_order": [r["algorithm"] for r in meas],
                       "fastest_match": pred[0]["algorithm"] == meas[0]["algorithm"],
                       "tau": tau})
    taus = [s["tau"] for s in shapes if s["tau"] is not None]
    return {"shapes": shapes, "n_shapes": len(shapes),
            "fraction_fastest": (sum(s["fastest_match"] for s in shapes) / len(shapes)
                                 if shapes else None),
            "mean_tau": sum(taus) / len(taus) if taus else None}


def _factor_value(rec: dict, factor: str):
    if factor == "causal":
        return "causal" if rec.get("causal") else "non-causal"
    if factor == "gqa":
        return "GQA" if rec.get("kv_heads") != rec.get("heads") else "MHA"
    return rec.get(factor)


def seqlen_slope(rows: list[dict]) -> float | None:
    """Least-squares slope of the error against log2(N), in error per doubling of N."""
    pts = [(math.log2(r["seqlen_q"]), rel_error(r)) for r in rows]
    if len({x for x, _ in pts}) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sxx


def factor_medians(rows: list[dict]) -> dict[str, dict]:
    """Per factor with two or more values: median error per value, sorted by value."""
    out = {}
    for factor in FACTORS:
        groups: dict = defaultdict(list)
        for r in rows:
            groups[_factor_value(r, factor)].append(rel_error(r))
        if len(groups) >= 2:
            out[factor] = {k: (median(v), len(v))
                           for k, v in sorted(groups.items(), key=lambda kv: str(kv[0]).zfill(8))}
    return out


def _fmt_groups(groups: dict) -> str:
    return ", ".join(f"{k}: {m:+.0%} ({n})" for k, (m, n) in groups.items())


def main_cause(rows: list[dict]) -> str:
    """A few sentences, computed from ``rows`` (one group's compared records), naming what the
    remaining error follows most: a shape-independent offset, or one workload property."""
    if not rows:
        return "no compared rows."
    errs = [rel_error(r) for r in rows]
    med, n = median(errs), len(errs)
    text = [(f"median error {med:+.1%} over {n} row{'s' if n != 1 else ''} (the model predicts "
             f"slower than measured in {sum(e > 0 for e in errs)}, faster in "
             f"{sum(e < 0 for e in errs)}).")]
    medians = factor_medians(rows)
    spreads = {f: max(m for m, _ in g.values()) - min(m for m, _ in g.values())
               for f, g in medians.items()}
    bounds = Counter(r.get("predicted_bound") for r in rows)
    top_bound, top_count = bounds.most_common(1)[0]
    top = max(spreads, key=spreads.get) if spreads else None
    if top is None or abs(med) >= spreads[top]:
        spread_txt = f"; the largest split, by {FACTORS[top]}, moves it only " \
                     f"{spreads[top]:.0%}" if top else ""
        text.append(f"Main cause: an offset common to all shapes{spread_txt}. The model binds "
                    f"on {top_bound} in {top_count} of {n} rows, so the {top_bound} rate or the "
                    f"overlap rule it applies is off by about {med:+.0%} for this kernel.")
    else:
        tied = [FACTORS[f] for f in spreads if f != top and spreads[f] >= TIE * spreads[top]]
        text.append(f"Main cause: the error follows {FACTORS[top]} (median per value: "
                    f"{_fmt_groups(medians[top])}; a {spreads[top]:.0%} spread, against a "
                    f"{med:+.0%} overall median)"
                    + (f"; {' and '.join(tied)} split it as much (confounded in these shapes)."
                       if tied else "."))
    slope = seqlen_slope(rows)
    if slope is not None and top != "seqlen_q":
        text.append(f"With N the error moves {slope:+.1%} per doubling.")
    elif slope is not None:
        text.append(f"Least-squares trend: {slope:+.1%} per doubling of N.")
    if "predicted_bound" in medians and top != "predicted_bound":
        text.append(f"By bound unit: {_fmt_groups(medians['predicted_bound'])}.")
    return " ".join(text)


def causes(records) -> dict[str, str]:
    """:func:`main_cause` per (group, phase) of compared rows."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in compared(records):
        groups[f"{label(r)}, {r.get('phase', 'fwd')}"].append(r)
    return {g: main_cause(rows) for g, rows in sorted(groups.items())}
