"""A tiled kernel's CTA edges (first loads, output stores, set-up) and WGMMA operand reads,
checked against the H200 microbenchmarks they rest on (validate/probe_cta_fixed.py and
validate/probe_wgmma_smem.py; neither times attention)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

import perfsim
from perfsim.algorithms import FA2
from perfsim.kernel import KernelCost
from perfsim.timing import TimingParams, cta_edge_seconds, time_kernel

PROBES = Path(__file__).resolve().parents[1] / "validate" / "reports" / "h200" / "probes"
H200 = perfsim.load_gpu("h200-sxm")


def _probe_fits():
    fits = []
    for name in ("probe_cta_fixed.json", "probe_cta_fixed-2.json"):
        fits += json.loads((PROBES / name).read_text())["fits"]
    return fits


def _edge_bytes(fit) -> int:
    """Q tile and first K/V tile in, O tile out (bf16), as FA2's forward counts them."""
    return 2 * fit["bm"] * fit["d"] * 2 + 2 * 2 * fit["bn"] * fit["d"]


def _tiled(**fields) -> KernelCost:
    base = dict(name="tile_loop", grid=H200.sm_count, tiled=True, tensor_flops=1e9,
                tensor_family="wgmma", ctas_per_sm=2, overlap=(("tensor",), ("hbm",)))
    return KernelCost(**{**base, **fields})


def test_wave_overhead_is_the_probes_median_residual():
    fits = _probe_fits()
    assert len(fits) == 6
    residual = statistics.median(
        f["fixed_s_per_wave"] - H200.load_latency_s
        - _edge_bytes(f) / H200.cta_load_bandwidth_bytes_per_s for f in fits)
    assert H200.cta_wave_overhead_s == pytest.approx(residual, abs=0.01e-6)


@pytest.mark.parametrize("index", range(6))
def test_edge_time_reproduces_each_probed_tile_within_15_percent(index):
    fit = _probe_fits()[index]
    per_wave = cta_edge_seconds(_tiled(edge_bytes=_edge_bytes(fit)), H200, TimingParams())
    assert per_wave == pytest.approx(fit["fixed_s_per_wave"], rel=0.15)


def test_edges_are_charged_per_wave_once_when_persistent_and_hide_behind_hbm():
    """Per wave of resident CTAs; a persistent kernel's CTAs pay them once and then only the
    fixed overhead per further unit (probe_persistent_unit.py's gqa series)."""
    params = TimingParams(launch_overhead_s=0.0)
    no_edges = TimingParams(launch_overhead_s=0.0, cta_overhead_s=0.0)
    cost = _tiled(grid=3 * 2 * H200.sm_count, edge_bytes=65536)
    per_wave = cta_edge_seconds(cost, H200, params)
    with_edges = time_kernel(cost, H200, params).seconds
    without = time_kernel(cost, H200, no_edges).seconds
    assert with_edges - without == pytest.approx(3 * per_wave, rel=1e-9)
    persistent = _tiled(grid=3 * 2 * H200.sm_count, edge_bytes=65536, persistent=True)
    assert (time_kernel(persistent, H200, params).seconds
            - time_kernel(persistent, H200, no_edges).seconds) == pytest.approx(
        per_wave + 2 * H200.cta_wave_overhead_s)
    # an HBM-bound kernel: the SMs' edges pass while the other CTAs' loads stream, but for
    # the first wave's start and the last one's end (one wave's edges in all)
    streaming = _tiled(grid=3 * 2 * H200.sm_count, edge_bytes=65536, hbm_read_bytes=1e10)
    hbm = time_kernel(streaming, H200, params)
    assert hbm.seconds - time_kernel(streaming, H200, no_edges).seconds == \
        pytest.approx(per_wave, rel=1e-9)
    assert hbm.bound == "hbm"
    untiled = _tiled(tiled=False, edge_bytes=65536)
    assert cta_edge_seconds(untiled, H200, params) == 0.0


def test_an_unpipelined_kernel_does_not_wait_for_its_first_loads_twice():
    chained = _tiled(edge_bytes=0, load_chain=(4, 65536))
    assert cta_edge_seconds(chained, H200, TimingParams()) == H200.cta_wave_overhead_s


def test_a_calibrated_per_wave_figure_replaces_the_modelled_edges():
    spec = perfsim.load_gpu(Path(__file__).resolve().parents[1] / "validate" / "profiles"
                            / "h200-sxm-calibrated.toml")
    params = TimingParams.for_gpu(spec)
    fitted = float(spec.calibration["cta_overhead_s"])
    assert cta_edge_seconds(_tiled(edge_bytes=65536), spec, params) == fitted
    assert TimingParams().cta_overhead_s is None


def test_short_sequences_pay_their_edges_long_ones_do_not():
    """B·N fixed: the same number of CTAs, so the same edges, on work that grows with N."""
    def share(n):
        w = perfsim.AttentionWorkload(batch=16384 // n, heads=16, seqlen_q=n, head_dim=128)
        with_edges = perfsim.predict(w, "h200-sxm", "sdpa-flash").kernels[0].seconds
        params = perfsim.timing_for("h200-sxm", "sdpa-flash", cta_overhead_s=0.0)
        without = perfsim.predict(w, "h200-sxm", "sdpa-flash", timing=params).kernels[0]
        return with_edges / without.seconds - 1
    assert share(256) > 0.05 > 0.01 > share(16384) > 0


# ------------------------------------------------------------------ WGMMA operand reads
def test_wgmma_operand_bytes_per_warpgroup_stay_under_the_shared_memory_port():
    """Counted once per warpgroup, the probe's operand traffic tops out near the SM's
    128 B/clk shared-memory port when N is small (the GEMM is port-bound) and stays below it
    everywhere; counted once per warp it would exceed the port several times over."""
    rows = [r for r in json.loads((PROBES / "probe_wgmma_smem.json").read_text())["rows"]
            if "error" not in r]
    assert rows and all(r["ptx"]["wgmma"] > 0 and r["ptx"]["mma_sync"] == 0 for r in rows)
    port = H200.smem_bandwidth_bytes_per_clk_per_sm
    for r in rows:
        assert r["operand_bytes_per_clk_per_sm"] < port
        per_warp = (r["operand_bytes_per_clk_per_sm"] * r["warps"]
                    * (r["bm"] * r["bk"] + r["bn"] * r["bk"])
                    / (r["bm"] * r["bk"] + r["bn"] * r["bk"] * max(r["warps"] // 4, 1)))
        assert per_warp > 1.5 * port
    narrow = [r["operand_bytes_per_clk_per_sm"] for r in rows if r["bn"] == 32]
    assert min(narrow) > 0.85 * port


def test_triton_kernels_read_wgmma_operands_once_per_warpgroup():
    w = perfsim.AttentionWorkload(batch=1, heads=16, seqlen_q=4096, head_dim=128)
    dims = perfsim.algorithms.Dims.of(w)
    wgmma = FA2(block_m=128, block_n=64, warps=8, tensor_family="wgmma").kernels(dims, H200)[0]
    sync = FA2(block_m=128, block_n=64, warps=8).kernels(dims, H200)[0]
    kv = sync.terms["smem_write/K,V"]
    assert sync.terms["smem_read/K,V (every warp)"] == 8 * kv
    assert wgmma.terms["smem_read/K,V (every warpgroup)"] == 2 * kv
    assert wgmma.smem_read_bytes < sync.smem_read_bytes / 2


def test_a_single_wave_decode_pays_its_edges_even_when_hbm_bound():
    w = perfsim.AttentionWorkload(batch=8, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=8192,
                                  head_dim=128)
    with_edges = perfsim.predict(w, "h200-sxm", "flash-attn-2")
    no_edges = perfsim.predict(w, "h200-sxm", "flash-attn-2",
                               timing=perfsim.timing_for("h200-sxm", "flash-attn-2",
                                                         cta_overhead_s=0.0))
    main = with_edges.kernels[0]
    resident = H200.sm_count * main.cost.ctas_per_sm
    assert main.cost.grid <= resident and main.bound == "hbm"          # one wave
    assert (main.seconds - no_edges.kernels[0].seconds
            == pytest.approx(cta_edge_seconds(main.cost, H200, with_edges.timing), rel=1e-6))


# ------------------------------------------------------------------ Triton kernels' cycle
def test_the_cycle_has_no_more_customers_than_the_grid_gives_an_sm():
    """32 CTAs on 132 SMs: one per SM, however many would fit."""
    w = perfsim.AttentionWorkload(batch=2, heads=16, seqlen_q=64, seqlen_k=64, head_dim=128)
    cost = perfsim.predict(w, "h200-sxm", "triton-tutorial").kernels[0].cost
    assert cost.grid < H200.sm_count and cost.ctas_per_sm > 1
    assert cost.pipeline[1] == 1
    big = w.replace(batch=64, seqlen_q=4096, seqlen_k=4096)
    cost = perfsim.predict(big, "h200-sxm", "triton-tutorial").kernels[0].cost
    assert cost.pipeline[1] == cost.ctas_per_sm > 1


@pytest.mark.parametrize("gpu, d", [("rtx-4090", 64), ("l40s", 128), ("a10g", 64),
                                    ("a100-sxm4-80gb", 192), ("h200-sxm", 192)])
def test_flexattention_forward_takes_fewer_stages_where_three_do_not_fit(gpu, d):
    w = perfsim.AttentionWorkload(batch=1, heads=8, seqlen_q=1024, head_dim=d)
    spec = perfsim.load_gpu(gpu)
    cost = perfsim.predict(w, spec, "flex").kernels[0].cost
    assert cost.smem_bytes_per_cta <= spec.smem_bytes_per_block


def test_wgmma_backward_operand_term_matches_its_gemms():
    """The smem term and the per-GEMM bytes count the same reads, the recomputed or repeated
    S and dP GEMMs included (FlexAttention's dQ pass; cuDNN's second warpgroup at d 256)."""
    for algo, d in (("flex", 64), ("flex", 256), ("sdpa-cudnn", 256), ("sdpa-cudnn", 128)):
        w = perfsim.AttentionWorkload(batch=2, heads=8, seqlen_q=2048, head_dim=d,
                                      phase="bwd")
        cost = next(k.cost for k in perfsim.predict(w, "h200-sxm", algo).kernels
                    if k.cost.gemms)
        from_gemms = sum(cost.terms[t] * per_flop for t, per_flop in cost.gemms)
        assert from_gemms == pytest.approx(cost.terms["smem_read/MMA operands"], rel=1e-9)


def test_flash_attn_cute_on_hopper_runs_one_cta_per_tile_and_cudnn_is_persistent():
    """flash_attn.cute's sm90 tile schedulers are built with is_persistent=False (its
    forward) and SingleTileScheduler (its backward); cuDNN's kernels launch 132 CTAs."""
    w = perfsim.AttentionWorkload(batch=1, heads=32, seqlen_q=4096, head_dim=128,
                                  phase="fwd_bwd")
    cute = [k.cost for k in perfsim.predict(w, "h200-sxm", "flash-attn-cute").kernels
            if k.cost.tiled]
    cudnn = [k.cost for k in perfsim.predict(w, "h200-sxm", "sdpa-cudnn").kernels
             if k.cost.tiled]
    assert len(cute) == 2 and not any(c.persistent for c in cute)
    assert len(cudnn) == 2 and all(c.persistent for c in cudnn)
