"""Score the default path on the inference-shaped H200 rows (``external_decode.py``): decode
with and without GQA packing, paged K/V, variable-length batches and sliding windows.

For each ok row the prediction is ``perfsim.predict(workload, gpu=GPU, algorithm=<preset>)``
with the row's window, page size and sequence lengths in the workload and the options the
row requested explicitly (``launch_config.pack_gqa_requested`` /
``num_splits_requested``) on the preset (``Implementation.options``); ``num_splits=0`` is the
library's own choice, i.e. the preset's default. The report gives per (implementation,
workload kind): rows, median and max |error|, median signed error, share within ±15 %;
forward only.

    python -m perfsim.validate.decode_report DIR [--gpu h200-sxm] [--out DIR/score-GPU]
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

from perfsim.errors import InfeasibleError, PerfsimError

#: ``impl`` field -> implementation preset.
PRESETS = {"sdpa_flash": "sdpa-flash", "sdpa_cudnn": "sdpa-cudnn",
           "sdpa_efficient": "sdpa-efficient", "cute": "flash-attn-cute", "flex": "flex"}
#: Fields copied from a row into the workload.
SHAPE = ("batch", "heads", "kv_heads", "seqlen_q", "seqlen_k", "head_dim", "causal", "dtype")


def load_rows(path: Path) -> tuple[list[dict], int]:
    """Rows by key (the last wins) and the number of unreadable lines."""
    rows, bad = {}, 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            rec = json.loads(line)
            rows[rec["key"]] = rec
        except (json.JSONDecodeError, KeyError, TypeError):
            bad += bool(line.strip())
    return list(rows.values()), bad


def workload(r: dict):
    import perfsim

    kw = {k: r[k] for k in SHAPE}
    if r.get("window_left") is not None or r.get("window_right") is not None:
        kw["window"] = (r.get("window_left"), r.get("window_right"))
    if r.get("page_size"):
        kw["page_size"] = r["page_size"]
    if r.get("seqlens_q"):
        kw.update(seqlens_q=tuple(r["seqlens_q"]), seqlens_k=tuple(r["seqlens_k"]))
        kw.pop("batch")
        kw.pop("seqlen_q")
        kw.pop("seqlen_k")
    return perfsim.AttentionWorkload(**kw, phase="fwd")


def preset(r: dict):
    from perfsim.implementations import resolve_implementation

    impl = resolve_implementation(PRESETS[r["impl"]])
    options = {}
    launch = r.get("launch_config") or {}
    if launch.get("pack_gqa_requested") is not None:
        options["pack_gqa"] = bool(launch["pack_gqa_requested"])
    if launch.get("num_splits_requested") not in (None, 0):
        options["num_splits"] = int(launch["num_splits_requested"])
    return impl.model_copy(update={"options": options}) if options else impl


def score(rows: list[dict], gpu: str = "h200-sxm") -> list[dict]:
    """One dict per ok row: ids, measured and predicted seconds, error (or the reason the
    model refused the row)."""
    import perfsim

    out = []
    for r in rows:
        if r.get("status") != "ok" or r.get("impl") not in PRESETS:
            continue
        ids = {"kind": r["kind"], "impl": r["impl"], "algorithm": r["algorithm"],
               **{k: r[k] for k in SHAPE}, "window": (r.get("window_left"),
                                                      r.get("window_right")),
               "page_size": r.get("page_size"), "varlen": bool(r.get("seqlens_q"))}
        measured = r["measured_s"]
        try:
            p = perfsim.predict(workload(r), gpu=gpu, algorithm=preset(r))
        except (InfeasibleError, PerfsimError) as exc:
            out.append({**ids, "measured_s": measured, "predicted_s": None,
                        "reason": str(exc)})
            continue
        out.append({**ids, "measured_s": measured, "predicted_s": p.seconds,
                    "error": (p.seconds - measured) / measured, "bound": p.bound,
                    "predicted_clock_hz": p.clock_hz,
                    "measured_nvml_clock_hz": r.get("sm_clock_mean_hz")})
    return out


def group_table(scored: list[dict]) -> list[dict]:
    """Per (implementation, kind): n, median and max |error|, median signed, within ±15 %."""
    from perfsim.validate.external_report import _median

    groups: dict = {}
    for s in scored:
        if s.get("predicted_s") is not None:
            groups.setdefault((s["impl"], s["kind"]), []).append(s["error"])
    return [{"impl": i, "kind": k, "n": len(e), "median_abs": _median([abs(x) for x in e]),
             "max_abs": max(abs(x) for x in e), "median_signed": _median(e),
             "within_15": sum(abs(x) <= 0.15 for x in e) / len(e)}
            for (i, k), e in sorted(groups.items(), key=lambda x: (x[0][1], x[0][0]))]


def report(directory: Path, gpu: str, out: Path) -> str:
    rows, bad = load_rows(directory / "results.jsonl")
    scored = score(rows, gpu)
    table = group_table(scored)
    lines = [f"# perfsim vs inference-shaped kernels — {Path(gpu).stem}, default options",
             "", f"Measurements: `{directory}/results.jsonl` ({len(rows)} rows, {bad} "
             "unreadable lines). Predictions: the implementation preset with the row's "
             "explicit options; forward only.", "",
             "| implementation | kind | rows | median \\|err\\| | max \\|err\\| | median signed "
             "| within ±15 % |", "|---|---|---|---|---|---|---|"]
    for t in table:
        lines.append(f"| {t['impl']} | {t['kind']} | {t['n']} | {100 * t['median_abs']:.1f} % "
                     f"| {100 * t['max_abs']:.1f} % | {100 * t['median_signed']:+.1f} % | "
                     f"{100 * t['within_15']:.0f} % |")
    refused = [s for s in scored if s.get("predicted_s") is None]
    if refused:
        lines += ["", f"Rows the model refused ({len(refused)}):"]
        lines += [f"- {s['algorithm']} {s['kind']} B={s['batch']} H={s['heads']}/"
                  f"{s['kv_heads']} N={s['seqlen_q']}/{s['seqlen_k']}: {s['reason']}"
                  for s in refused]
    text = "\n".join(lines) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(text, encoding="utf-8")
    with open(out / "rows.csv", "w", newline="", encoding="utf-8") as f:
        keys = sorted({k for s in scored for k in s})
        writer = csv.DictWriter(f, fieldnames=keys)
        writer.writeheader()
        writer.writerows(scored)
    return text


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perfsim.validate.decode_report",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--gpu", default="h200-sxm")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    out = args.out or args.directory / f"score-{Path(args.gpu).stem}"
    try:
        print(report(args.directory, args.gpu, out), end="")
    except (OSError, PerfsimError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
