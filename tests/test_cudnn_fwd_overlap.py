"""cuDNN's sm90 forward: which calls overlap one warpgroup's exps with the other's MMAs, and
which run them in turn (``FA3.fwd_pipes_in_turn``, ``implementations.cudnn_fwd_pipes_in_turn``).

The evidence is Nsight Compute's pipe counters of the kernels (committed summaries), not
attention timings: the tests hold the rule to the profiles it was read from and check that
every path of perfsim (predict, the sweep's engines) takes the same rule."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import perfsim
from perfsim import AttentionWorkload
from perfsim.algorithms.base import Dims
from perfsim.frozen import replace
from perfsim.implementations import configured, cudnn_fwd_pipes_in_turn

REPO = Path(__file__).resolve().parent.parent
PROFILES = [REPO / "validate/reports/h100/probes/ncu/summary-cudnn-fwd-overlap.json",
            REPO / "validate/reports/h200/probes/ncu/summary-dropout.json",
            REPO / "validate/reports/h200/probes/ncu/summary-dropout-spills.json"]
#: The profiles' shapes: B = 1, H = 4096 / d, N = 4096 unless the case name says otherwise
#: (validate/probe_ncu.py).
CASE = re.compile(r"cudnn-fwd-d(\d+)((?:-[nbh]\d+)*)(-c)?$")


def _dims(d, n, causal=False, n_k=None):
    return Dims.of(AttentionWorkload(batch=1, heads=8, seqlen_q=n, seqlen_k=n_k or n,
                                     head_dim=d, causal=causal))


@pytest.mark.parametrize("d, n, causal, n_k, in_turn", [
    (128, 4096, False, None, False),      # the one overlapping path
    (96, 2048, False, None, False),       # run by the head-dim-128 kernel
    (128, 4000, False, None, True),       # keys off 128: the last tile masked per score
    (128, 4096, False, 4000, True),
    (128, 16, False, 32768, False),       # few query rows: rows past them only not stored
    (128, 4000, False, 4096, False),
    (128, 4096, True, None, True),        # the masked path
    (64, 4096, False, None, True),
    (160, 4096, False, None, True),       # the head-dim-192 kernel
    (256, 4096, False, None, True),
])
def test_only_the_head_dim_128_kernel_masking_no_score_overlaps(d, n, causal, n_k,
                                                                        in_turn):
    assert cudnn_fwd_pipes_in_turn(_dims(d, n, causal, n_k)) is in_turn


def test_the_rule_works_per_element_on_arrays():
    dims = Dims.of(AttentionWorkload(batch=1, heads=8, seqlen_q=4096, head_dim=128))
    dims = replace(dims, N_q=np.array([4096, 4000, 2048]), N_k=np.array([4096, 4000, 2048]),
                   d=np.array([128, 128, 256]), d_v=np.array([128, 128, 256]))
    assert list(cudnn_fwd_pipes_in_turn(dims)) == [False, True, True]
    dims = replace(dims, N_q=np.array([16, 16, 16]), N_k=np.array([32768, 1000, 4096]))
    assert list(cudnn_fwd_pipes_in_turn(dims)) == [False, True, True]


def _fwd_kernel(workload, gpu="h200-sxm"):
    p = perfsim.predict(workload, gpu=gpu, algorithm="sdpa-cudnn")
    return next(k for k in p.kernels if k.cost.name == "fa3_fwd")


def test_the_in_turn_cycle_adds_the_mma_and_mufu_stations():
    w = AttentionWorkload(batch=4, heads=24, seqlen_q=4096, head_dim=64)
    cost = _fwd_kernel(w).cost
    assert cost.pipeline == ((("tensor", "smem"), ("mufu",)), 1, (False, False))
    assert cost.exp_after == ()                      # the exps' lead runs under the stations
    assert ("fp32",) in cost.overlap
    # the overlapping path keeps the two-in-flight cycle and the lead
    cost = _fwd_kernel(w.model_copy(update={"head_dim": 128})).cost
    assert cost.pipeline[0][1] == ("mufu", "fp32") and cost.pipeline[1] == 2
    assert cost.exp_after


def _profiled():
    out = []
    for path in PROFILES:
        doc = json.loads(path.read_text())
        gpu = "h100-sxm5" if "H100" in doc.get("source", "") else "h200-sxm"
        for case, kernels in doc["cases"].items():
            m = CASE.match(case)
            if not m:
                continue
            d = int(m.group(1))
            extra = {s[0]: int(s[1:]) for s in m.group(2).split("-") if s}
            for k in kernels:
                if "cudnn_generated" in k["kernel"] and k.get("inst_pipe_xu"):
                    out.append((case, gpu, d, extra.get("b", 1), extra.get("h", 4096 // d),
                                extra.get("n", 4096), bool(m.group(3)), k))
    return out


PROFILED = _profiled()


def test_the_profiles_carry_the_rule():
    """The rule is what the profiles say: the tensor pipe's and the MUFU's busy shares sum to
    more than 105 % of the duration (one warpgroup's exps under the other's MMAs) exactly
    where the rule keeps the overlapping cycle, and to at most 103 % elsewhere."""
    assert len(PROFILED) >= 12
    for case, gpu, d, _b, _h, n, causal, k in PROFILED:
        sms = perfsim.load_gpu(gpu).sm_count
        xu = k["inst_pipe_xu"] * 32 / (16 * sms) / k["effective_clock_hz"] / k["duration_s"]
        both = k["tensor_pipe_pct"] / 100 + xu
        in_turn = cudnn_fwd_pipes_in_turn(_dims(d, n, causal))
        assert (both <= 1.03) if in_turn else (both > 1.05), (case, both)


@pytest.mark.parametrize("case, gpu, d, b, h, n, causal, k", PROFILED,
                         ids=[p[0] + "-" + p[1] for p in PROFILED])
def test_the_forward_kernel_matches_its_profile(case, gpu, d, b, h, n, causal, k):
    """The model's forward kernel at the profile's clock against Nsight Compute's duration of
    that launch (not power-capped): within 10 %."""
    spec = perfsim.load_gpu(gpu)
    spec = spec.replace(clock_hz=min(k["effective_clock_hz"], spec.clock_hz))
    w = AttentionWorkload(batch=b, heads=h, seqlen_q=n, head_dim=d, causal=causal)
    p = perfsim.predict(w, gpu=spec, algorithm="sdpa-cudnn", timing={"clock": "datasheet"})
    kernel = next(x for x in p.kernels if x.cost.name == "fa3_fwd")
    assert kernel.seconds == pytest.approx(k["duration_s"], rel=0.10)


def test_sweeps_take_the_rule_per_row():
    grid = dict(gpus=["h100-sxm5"], algorithms="sdpa-cudnn", batch=[2], heads=[16],
                seqlen_q=[1000, 1024, 4096], head_dim=[64, 128, 256], causal=[False, True],
                phase=["fwd", "bwd", "fwd_bwd"])
    for engine in ("numpy", "compiled"):
        frame = perfsim.sweep(**grid, engine=engine)
        for row in frame.itertuples():
            w = AttentionWorkload(batch=2, heads=16, seqlen_q=row.seqlen_q,
                                  head_dim=row.head_dim, causal=row.causal, phase=row.phase)
            expected = perfsim.predict(w, gpu="h100-sxm5", algorithm="sdpa-cudnn").seconds
            assert row.seconds == pytest.approx(expected, rel=1e-9), (engine, row)


def test_a_backward_alone_over_both_paths_is_one_block():
    # a backward runs no forward: lengths on and off the tiles sweep together (a backward
    # grid once refused the whole block over the forward's path)
    frame = perfsim.sweep(batch=1, heads=16, seqlen_q=[100, 1024], head_dim=128, phase="bwd",
                          gpus="h100-sxm5", algorithms="sdpa-cudnn")
    assert (frame.infeasible == "").all() and (frame.seconds > 0).all()
    rows = perfsim.predict_rows(frame[["batch", "heads", "seqlen_q", "head_dim", "phase"]],
                                gpu="h100-sxm5", algorithm="sdpa-cudnn")
    assert list(rows.seconds) == pytest.approx(list(frame.seconds), rel=1e-9)


def test_a_fwd_bwd_sweep_at_one_query_token_over_both_paths():
    # a helper's find: one query token keys the decode kernel, but a fwd_bwd call's backward
    # runs the training kernels, so the block still needs one path
    frame = perfsim.sweep(batch=1, heads=16, seqlen_q=1, seqlen_k=[4095, 4096], head_dim=128,
                          phase="fwd_bwd", gpus="h100-sxm5", algorithms="sdpa-cudnn")
    for row in frame.itertuples():
        w = AttentionWorkload(batch=1, heads=16, seqlen_q=1, seqlen_k=row.seqlen_k,
                              head_dim=128, phase="fwd_bwd")
        assert row.seconds == pytest.approx(
            perfsim.predict(w, gpu="h100-sxm5", algorithm="sdpa-cudnn").seconds, rel=1e-9)


def test_a_variable_length_batch_takes_the_path_of_all_its_sequences():
    # one launch: a sequence whose keys leave a partial tile masks scores for the batch
    dims = Dims.of(AttentionWorkload(heads=16, head_dim=128, seqlens_q=(4000, 4000, 4096),
                                     seqlens_k=(4000, 4000, 4096)))
    assert cudnn_fwd_pipes_in_turn(dims) is True
    dims = Dims.of(AttentionWorkload(heads=16, head_dim=128, seqlens_q=(1000, 4096),
                                     seqlens_k=(3968, 4096)))
    assert cudnn_fwd_pipes_in_turn(dims) is False


def test_explain_names_the_path_and_who_chose_it():
    def line(p):
        return next((x for x in p.explain().splitlines() if x.startswith("cuDNN's forward")),
                    None)

    w = AttentionWorkload(batch=4, heads=16, seqlen_q=4096, head_dim=128)
    assert "overlaps one consumer warpgroup's exps" in line(
        perfsim.predict(w, gpu="h100-sxm5", algorithm="sdpa-cudnn"))
    assert "in turn on this call:" in line(
        perfsim.predict(w.replace(causal=True), gpu="h100-sxm5", algorithm="sdpa-cudnn"))
    forced = configured("sdpa-cudnn", {"fwd_pipes_in_turn": True})
    assert "because the fwd_pipes_in_turn option says so" in line(
        perfsim.predict(w, gpu="h100-sxm5", algorithm=forced))
    # the decode kernel runs a fwd_bwd call's forward at one query token: no such line
    one = AttentionWorkload(batch=1, heads=16, seqlen_q=1, seqlen_k=4095, head_dim=128,
                            phase="fwd_bwd")
    assert line(perfsim.predict(one, gpu="h100-sxm5", algorithm="sdpa-cudnn")) is None
    # and no line off Hopper (the stand-in FA2 loop)
    assert line(perfsim.predict(w, gpu="a100-sxm4-80gb", algorithm="sdpa-cudnn")) is None
