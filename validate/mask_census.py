"""What the causal mask adds to flash-attn 2's forward, per masked tile, from Nsight Compute
counters (``validate/ncu_summary.py`` summaries of ``validate/probe_ncu.sh`` cases run in
causal / non-causal pairs of one shape).

    python -m perfsim.validate.mask_census \
        validate/reports/h200/probes/ncu/summary-causal-mask.json \
        validate/reports/h200/probes/ncu/summary-causal-mask-2.json

A pair is a case ``flash-fwd-dD-nN-bB-hH-c`` and the same case without ``-c``. The
non-causal kernel runs the same CTAs (one per query tile) over every key tile; the causal one
visits the tiles up to each query tile's last row and masks the last ``n_masking_steps`` of
them (flash-attn 2's count, :func:`perfsim.validate.masked_tile_fit.tile_counts`). Taking an
unmasked tile of the causal kernel to execute what an average tile of the non-causal kernel
does, the instructions a masked tile adds per score element are

    (count_causal − count_noncausal · tiles_causal / tiles_noncausal) / (masked · B_r · B_c)

per pipe (ALU, FMA, MUFU, LSU, uniform: lane instructions, warp instructions × 32) and, with
an opcode census, per opcode; a counter missing from either record gives no figure (not 0).
The CTAs' fixed work (Q in, O out; not measured apart) is the same in both calls and is
counted with the non-causal tiles, so the tile ratio spreads part of it over the masked
ones. Pairs whose N is not a multiple of both tiles mix in the bound checks of the
non-causal kernel's last key tile (flagged ``uneven``). Beside the census: the causal call's
time over the non-causal one's against the ratio of their tiles, issue-slot use, and the warp
stall reasons (warps stalled per issue-active cycle; ``selected``, the warp that issued, is
left out) of both. Head dims without a flash-attn 2 sm90 tile in
:data:`~perfsim.validate.masked_tile_fit.FWD_TILES` are named and skipped.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from perfsim.validate.masked_tile_fit import FWD_TILES, tile_counts

PIPES = ("alu", "fma", "xu", "lsu", "uniform")
_CASE = re.compile(r"^flash-fwd-d(\d+)-n(\d+)-b(\d+)-h(\d+)$")


def _kernel(kernels: list[dict]) -> dict:
    """The attention kernel of a case: its longest kernel."""
    return max(kernels, key=lambda k: k.get("duration_s") or 0)


def census(causal: dict, plain: dict, tiles_c: int, tiles_n: int, masked: int,
           elements: int) -> dict:
    """Per masked score element, what the causal kernel executes beyond ``tiles_c`` of the
    non-causal kernel's average tile: ``{"pipes": {pipe: lane instructions}, "opcodes":
    {opcode: lane instructions}, "instructions": all}``. ``causal``/``plain``: summary
    kernel records; ``tiles_*``: tiles visited; ``masked``: masked tiles; ``elements``:
    ``B_r · B_c``.

    A counter missing (``None``) from either record gives ``None``.

    Raises:
        ValueError: no masked tile or no non-causal tile.
    """
    if masked <= 0 or tiles_n <= 0:
        raise ValueError(f"census needs masked and non-causal tiles, got {masked} and "
                         f"{tiles_n}")
    scale = tiles_c / tiles_n

    def delta(a, b):
        if a is None or b is None:
            return None
        return (a - b * scale) * 32 / (masked * elements)

    out = {"pipes": {p: delta(causal.get(f"inst_pipe_{p}"), plain.get(f"inst_pipe_{p}"))
                     for p in PIPES},
           "instructions": delta(causal.get("instructions"), plain.get("instructions"))}
    oc, on = causal.get("opcodes"), plain.get("opcodes")
    if oc and on:
        # an opcode a kernel never ran has the count 0 in its census
        out["opcodes"] = {op: delta(oc.get(op, 0), on.get(op, 0))
                          for op in sorted(set(oc) | set(on))}
    return out


def _ratio(a, b):
    return a / b if a and b else None


def pairs(cases: dict, skipped: list | None = None) -> list[dict]:
    """Every causal / non-causal pair of flash forward cases in ``cases`` (name -> kernels),
    with its tiles, census, times and stalls; ``skipped`` (a list) receives the pairs left
    out and why."""
    out = []
    for name in sorted(cases):
        m = _CASE.match(name)
        if not m or f"{name}-c" not in cases:
            continue
        d, n, b, h = map(int, m.groups())
        if d not in FWD_TILES:
            if skipped is not None:
                skipped.append(f"{name}: head dim {d} has no flash-attn 2 sm90 forward tile "
                               f"here (head dims {', '.join(map(str, FWD_TILES))})")
            continue
        b_r, b_c = FWD_TILES[d]
        bh = b * h
        t_n, _ = tile_counts(n, b_r, b_c, False)
        t_c, masked = tile_counts(n, b_r, b_c, True)
        kc, kn = _kernel(cases[f"{name}-c"]), _kernel(cases[name])
        out.append({
            "case": name, "head_dim": d, "seqlen": n, "tiles": (b_r, b_c),
            "uneven": bool(n % b_r or n % b_c),
            "tiles_causal": bh * t_c, "tiles_noncausal": bh * t_n, "masked": bh * masked,
            "census": census(kc, kn, bh * t_c, bh * t_n, bh * masked, b_r * b_c),
            "time_ratio": _ratio(kc.get("duration_s"), kn.get("duration_s")),
            "issue_active_pct": (kc.get("issue_active_pct"), kn.get("issue_active_pct")),
            "stalls": (kc.get("stalls") or {}, kn.get("stalls") or {}),
        })
    return out


def _load(paths: list[Path]) -> dict:
    """Every case of the summaries (name -> kernel records).

    Raises:
        ValueError: a file that is not an ``ncu_summary`` JSON (its reason named)."""
    cases = {}
    for path in paths:
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: not readable as JSON ({exc})") from None
        got = data.get("cases") if isinstance(data, dict) else None
        if isinstance(got, list):
            got = dict(got) if all(isinstance(c, list) and len(c) == 2 for c in got) else None
        if not isinstance(got, dict) or not all(
                isinstance(k, list) and all(isinstance(r, dict) for r in k)
                for k in got.values()):
            raise ValueError(f"{path}: not an ncu_summary file (no 'cases' of kernel records)")
        cases.update(got)
    return cases


def _fmt(value, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("summaries", nargs="+", type=Path,
                    help="ncu_summary JSON files holding causal / non-causal pairs")
    ap.add_argument("--opcodes", type=float, default=0.05, metavar="MIN",
                    help="list opcodes whose census is at least MIN per element (0.05)")
    args = ap.parse_args(argv)
    missing = [str(p) for p in args.summaries if not p.is_file()]
    if missing:
        print(f"mask_census: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    try:
        cases = _load(args.summaries)
    except ValueError as exc:
        print(f"mask_census: {exc}", file=sys.stderr)
        return 2
    skipped: list[str] = []
    found = pairs(cases, skipped)
    for why in skipped:
        print(f"mask_census: skipped {why}", file=sys.stderr)
    if not found:
        print("mask_census: no flash-fwd-dD-nN-bB-hH case with its -c pair to read in "
              + ", ".join(map(str, args.summaries)), file=sys.stderr)
        return 1
    for p in found:
        c = p["census"]
        pipes = " ".join(f"{k} {_fmt(v, '+.2f')}" for k, v in c["pipes"].items())
        print(f"{p['case']}{' (uneven)' if p['uneven'] else ''}: tiles {p['tiles'][0]}x"
              f"{p['tiles'][1]}, causal {p['tiles_causal']} ({p['masked']} masked) of "
              f"{p['tiles_noncausal']}")
        print(f"  per masked element: {pipes}; all {_fmt(c['instructions'], '+.2f')}")
        if "opcodes" in c:
            ops = sorted(((v, k) for k, v in c["opcodes"].items() if abs(v) >= args.opcodes),
                         reverse=True)
            print("  opcodes: " + ", ".join(f"{k} {v:+.2f}" for v, k in ops))
        ratio = p["tiles_causal"] / p["tiles_noncausal"]
        issue_c, issue_n = p["issue_active_pct"]
        print(f"  time causal / non-causal {_fmt(p['time_ratio'], '.3f')} (tiles "
              f"{ratio:.3f}); issue active {_fmt(issue_c, '.1f')} / {_fmt(issue_n, '.1f')} %")
        sc, sn = ({r: v for r, v in st.items() if r != "selected"} for st in p["stalls"])
        top = sorted(set(sc) | set(sn), key=lambda r: -max(sc.get(r, 0), sn.get(r, 0)))[:5]
        print("  stalls (warps per issue cycle, causal / non-causal): "
              + (", ".join(f"{r} {sc.get(r, 0):.2f} / {sn.get(r, 0):.2f}" for r in top)
                 or "none in these summaries"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
