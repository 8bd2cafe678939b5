"""FlexAttention's integer and predicate arithmetic per score element, from the Nsight
Compute instruction census (issue 9; no attention timing is used).

    python -m perfsim.validate.address_census      # prints the table

A finding, not part of the model: counted into the Triton presets' serial softmax station it
moved some groups the wrong way (validate/README.md, "FlexAttention's integer arithmetic:
counted, tried in the timing, not adopted"), so the presets leave it uncounted, as
``softmax_costs.ADDRESS_ARITHMETIC`` says.

For each profiled FlexAttention kernel on the H200 (torch 2.11, Triton 3.6; B = 1,
H = 4096 / d, N = 4096, bf16, non-causal unless the case says otherwise, so no bound checks
and no mask): the executed SASS instructions of the ALU pipe (the list of
``softmax_costs.ADDRESS_ARITHMETIC`` plus FSETP, FSEL, FMNMX and F2FP) and of the FMA pipe
(FMUL, FADD, FFMA, IMAD), in lane instructions per score element of the call, less what
perfsim counts for the same kernel (its executed work at the compiled head dim: the row max,
the conversion of P, the softmax's FP32 work, the scale multiplies): the instructions the
model does not issue. They are the integer address and loop
arithmetic of Triton's code — IADD3 and IMAD for the pointers of each 16-byte ``cp.async``
copy (LDGSTS), the loop predicates, MOVs — and vary with the compiled tile: the default
64 x 64 tile at dots 128 or 256 wide issues one IMAD per copy (0.5 and 1.0 per score
element), the 128 x 64 and 128 x 128 tiles almost none.

Sources: ``reports/h200/probes/ncu/summary-small-headdims.json`` (d 16, 32 forward; d 32
backward), ``summary-flexfwd.json`` (d 64, 192, 256 forward), ``summary-flexdiv.json``
(d 96 forward), ``summary.json`` (d 128 forward and backward), ``summary-flex-unaligned.json``
(d 104, 144, 216 forward: the same counts as 96 and 192, the kernels compiled for 128 and
256), ``summary-flex-aligned.json`` (d 112 forward), ``summary-spills.json`` (d 64, 192, 256
backward) and ``summary-flexdiv.json`` (d 96 backward). Not used: the profiles at lengths
that are not multiples of 128 (``summary-flexbwddiv.json``, the ``-n4000`` cases), whose bound
checks perfsim counts apart (``softmax_costs.BOUND_CHECK_ALU_OPS_PER_SCORE``).
"""

from __future__ import annotations

import json
from pathlib import Path

PROBES = Path(__file__).resolve().parent / "reports" / "h200" / "probes"

#: Opcodes by pipe, as the census of ``softmax_costs.ADDRESS_ARITHMETIC`` counts them, with
#: the compares, selects, max and conversions the softmax issues (which the model counts and
#: the difference removes).
ALU_OPCODES = ("LOP3", "ISETP", "PLOP3", "MOV", "CS2R", "LEA", "P2R", "VIADD", "SEL", "IADD3",
               "SHF", "PRMT", "FSETP", "FSEL", "FMNMX", "F2FP")
FMA_OPCODES = ("FMUL", "FADD", "FFMA", "IMAD")

#: (case, summary file, phase, head dim): B = 1, H = 4096 // d (or the case's -b/-h),
#: N = 4096, non-causal.
CASES = (
    ("flex-fwd-d16-b4-h32", "ncu/summary-small-headdims.json", "fwd", 16, 4, 32),
    ("flex-fwd-d32-b4-h32", "ncu/summary-small-headdims.json", "fwd", 32, 4, 32),
    ("flex-fwd-d64", "ncu/summary-flexfwd.json", "fwd", 64, 1, 64),
    ("flex-fwd-d96", "ncu/summary-flexdiv.json", "fwd", 96, 1, 42),
    ("flex-fwd-d104", "ncu/summary-flex-unaligned.json", "fwd", 104, 1, 39),
    ("flex-fwd-d112-b2-h16", "ncu/summary-flex-aligned.json", "fwd", 112, 2, 16),
    ("flex-fwd-d128", "ncu/summary.json", "fwd", 128, 1, 32),
    ("flex-fwd-d144", "ncu/summary-flex-unaligned.json", "fwd", 144, 1, 28),
    ("flex-fwd-d192", "ncu/summary-flexfwd.json", "fwd", 192, 1, 21),
    ("flex-fwd-d216", "ncu/summary-flex-unaligned.json", "fwd", 216, 1, 18),
    ("flex-fwd-d256", "ncu/summary-flexfwd.json", "fwd", 256, 1, 16),
    ("flex-bwd-d32-b4-h32", "ncu/summary-small-headdims.json", "bwd", 32, 4, 32),
    ("flex-bwd-d64", "ncu/summary-spills.json", "bwd", 64, 1, 64),
    ("flex-bwd-d96", "ncu/summary-flexdiv.json", "bwd", 96, 1, 42),
    ("flex-bwd-d128", "ncu/summary.json", "bwd", 128, 1, 32),
    ("flex-bwd-d192", "ncu/summary-spills.json", "bwd", 192, 1, 21),
    ("flex-bwd-d256", "ncu/summary-spills.json", "bwd", 256, 1, 16),
)
#: the generated attention kernel (Inductor's template), not the small helper kernels beside it
KERNEL_MARK = "triton_tem_fused"
SEQLEN = 4096


def _kernel(path: str, case: str) -> dict:
    kernels = json.loads((PROBES / path).read_text())["cases"][case]
    return next(k for k in kernels if k["kernel"].startswith(KERNEL_MARK))


def census() -> list[dict]:
    """One row per profiled case: ALU- and FMA-pipe lane instructions per score element,
    measured and counted by perfsim without an address census, and their differences."""
    from perfsim import AttentionWorkload, load_gpu
    from perfsim.algorithms.base import Dims
    from perfsim.implementations import resolve_implementation

    gpu = load_gpu("h200-sxm")
    rows = []
    for case, path, phase, d, b, h in CASES:
        kernel = _kernel(path, case)
        ops = kernel["opcodes"]

        def lanes(names, ops=ops):
            return 32 * sum(n for op, n in ops.items() if op.split(".")[0] in names)

        w = AttentionWorkload(batch=b, heads=h, seqlen_q=SEQLEN, head_dim=d, dtype="bf16",
                              phase=phase)
        dims = Dims.of(w)
        algo = resolve_implementation("flex").config(dims, gpu)
        main = max(algo.kernels(dims, gpu), key=lambda k: k.sm_demand()["tensor"])
        demand = main.executed or main.sm_demand()
        scores = b * h * SEQLEN * SEQLEN
        alu, fma = lanes(ALU_OPCODES) / scores, lanes(FMA_OPCODES) / scores
        model_alu, model_fma = demand.get("alu", 0) / scores, demand["fp32"] / 2 / scores
        rows.append({"case": case, "phase": phase, "head_dim": d,
                     "registers": kernel["registers_per_thread"],
                     "alu": alu, "fma": fma, "imad": lanes(("IMAD",)) / scores,
                     "model_alu": model_alu, "model_fma": model_fma,
                     "extra_alu": alu - model_alu, "extra_fma": fma - model_fma})
    return rows


def main() -> int:
    from perfsim.cli.common import print_table

    print_table("FlexAttention's integer arithmetic (Nsight Compute census, H200), lane "
                "instructions per score element",
                ["case", "ALU pipe", "FMA pipe (IMAD)", "perfsim ALU / FMA", "extra ALU",
                 "extra FMA"],
                [[r["case"], f"{r['alu']:.2f}", f"{r['fma']:.2f} ({r['imad']:.2f})",
                  f"{r['model_alu']:.2f} / {r['model_fma']:.2f}", f"{r['extra_alu']:.2f}",
                  f"{r['extra_fma']:.2f}"] for r in census()])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
