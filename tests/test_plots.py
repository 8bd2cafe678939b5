"""perfsim.plots: every figure renders to PNG and shows what it claims."""

from __future__ import annotations

import numpy as np
import pytest

import perfsim
from perfsim import plots
from perfsim.algorithms import Standard
from perfsim.plots.sweep import _tflops_label

W = perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=1024, head_dim=64, dtype="fp32",
                              causal=True)


@pytest.fixture(scope="module")
def frame():
    return perfsim.sweep(batch=2, heads=16, seqlen_q=[512, 1024, 4096], head_dim=[64, 128],
                         causal=[False, True], gpus=["a100-sxm4-80gb", "h200-sxm"],
                         algorithms=["standard", "fa2", "fa3"])


def _png(fig, path) -> None:
    fig.savefig(path, dpi=60)
    assert path.stat().st_size > 5_000
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_roofline_places_each_kernel(tmp_path):
    p = perfsim.predict(W, "rtx-5090", Standard(softmax="5kernel"))
    fig, ax = plots.roofline(p)
    _png(fig, tmp_path / "roofline.png")
    hbm = [c for c in ax.collections if c.get_zorder() == 4]      # filled: at HBM
    points = np.concatenate([c.get_offsets() for c in hbm])
    assert len(points) == len(p.kernels) == 9   # QK^T, scale, mask, 5 softmax kernels, PV
    assert points[:, 0].min() < 1 and points[:, 0].max() > 10   # elementwise ops ... GEMMs
    # the roofs are drawn at the clock the call runs at (the title says which); at the
    # datasheet clock the FP32 ridge is the 5090 post's 58 FLOP/B
    gpu = p.gpu
    assert gpu.fp32_flops_per_s / gpu.hbm_bandwidth_bytes_per_s == pytest.approx(58, abs=0.6)
    ridge = gpu.fp32_flops_per_s * p.clock_hz / gpu.clock_hz / gpu.hbm_bandwidth_bytes_per_s
    assert any(f"ridge {ridge:.0f} FLOP/B" in t.get_text() for t in ax.texts)
    assert f"{p.clock_hz / 1e6:.0f} MHz" in ax.get_title()
    assert not any("tensor cores" in t.get_text() for t in ax.texts)    # fp32: none
    legend = {t.get_text() for t in ax.get_legend().get_texts()}
    assert not any(t.startswith("L2 ceiling") for t in legend)   # no L2 bandwidth known


def test_roofline_has_l2_and_shared_memory_ceilings(tmp_path):
    """On the H200 (L2 read rates measured) FA2's forward sits at HBM, L2 and shared memory;
    under the shared-memory ceiling at its shared-memory intensity; the L2 line is the
    timing's L2 floor (GPUSpec.l2_load_peak_bytes_per_s), not the large-buffer rate."""
    w = perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=4096, head_dim=128)
    p = perfsim.predict(w, "h200-sxm", "fa2")
    fig, ax = plots.roofline(p)
    _png(fig, tmp_path / "roofline_h200.png")
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    gpu = p.gpu
    smem = gpu.smem_bandwidth_bytes_per_clk_per_sm * gpu.sm_count * p.clock_hz / 1e12
    for level, bw in (("HBM", 4.8), ("L2", 16.7), ("shared memory", smem)):
        found = [t for t in legend if t.startswith(f"{level} ceiling ")]
        assert found, legend
        value = float(found[0].removeprefix(f"{level} ceiling ").split()[0])
        assert value == pytest.approx(bw, rel=0.05), found
    assert len(ax.collections) == 3          # one point per level (one kernel)
    k = p.kernels[0]
    flops = float(k.cost.tensor_flops + k.cost.fp32_flops + k.cost.alu_ops + k.cost.exp_ops)
    achieved = flops / float(k.seconds)
    x_smem = flops / float(k.cost.smem_bytes)
    assert achieved <= x_smem * p.gpu.smem_bandwidth_bytes_per_s * (1 + 1e-9)


def test_roofline_names_the_kernels_it_cannot_place(tmp_path):
    """A kernel without FLOPs (FA2's dQ conversion) has no arithmetic intensity: it is left
    off the log-log axes and named under them, not dropped silently."""
    w = perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=2048, head_dim=64, phase="bwd")
    p = perfsim.predict(w, "h200-sxm", "fa2")
    assert "fa2_bwd_convert_dq" in [k.cost.name for k in p.kernels]
    fig, ax = plots.roofline(p)
    _png(fig, tmp_path / "roofline_bwd.png")
    said = [t.get_text() for t in ax.texts if t.get_text().startswith("not on the roofline")]
    assert len(said) == 1 and "fa2_bwd_convert_dq" in said[0]
    assert "fa2_bwd," not in said[0] and not said[0].endswith("fa2_bwd")
    hbm = [c for c in ax.collections if c.get_zorder() == 4]
    assert len(np.concatenate([c.get_offsets() for c in hbm])) == len(p.kernels) - 1


def test_roofline_refuses_an_empty_list_and_mixed_gpus():
    """One GPU's ceilings per figure: a fresh user's list across three GPUs drew the B200's
    FA4 above the H100's tensor roof; an empty list raised a bare IndexError."""
    w = perfsim.AttentionWorkload(batch=2, heads=16, seqlen_q=2048, head_dim=128)
    with pytest.raises(perfsim.PerfsimError, match="no prediction"):
        plots.roofline([])
    mixed = [perfsim.predict(w, "h100-sxm5", "fa3"), perfsim.predict(w, "b200", "fa4")]
    with pytest.raises(perfsim.PerfsimError, match="h100-sxm5, b200"):
        plots.roofline(mixed)


@pytest.mark.parametrize("call", [
    lambda: plots.time_by_unit([]), lambda: plots.time_by_unit({}),
    lambda: plots.unit_times([]), lambda: plots.unit_times([1.0]),
    lambda: plots.cycle_chart([]), lambda: plots.cycle_chart({}),
    lambda: plots.cycle_chart({"H100": {"mma": float("nan")}}),
    lambda: plots.cycle_chart({"H100": []})])
def test_every_plot_refuses_what_it_cannot_draw_in_one_message(call):
    """A fresh user's report: empty lists and dicts crashed with IndexError/AttributeError."""
    with pytest.raises(perfsim.PerfsimError):
        call()


def test_time_by_unit_stacks_every_kernel(tmp_path):
    w = W.replace(dtype="fp16", phase="fwd_bwd")
    preds = [perfsim.predict(w, "a100-sxm4-80gb", a) for a in ("standard", "fa1", "fa2")]
    fig, ax = plots.time_by_unit(preds)
    _png(fig, tmp_path / "time.png")
    assert len(ax.patches) == sum(len(p.kernels) for p in preds)
    widths = [b.get_width() for b in ax.patches]
    assert sum(widths) == pytest.approx(sum(p.seconds for p in preds) * 1e3)
    # the legend (outside the axes) names only the units that bind a segment, and kernel
    # names are written only inside segments wide enough for them
    legend = ax.get_legend()
    assert {t.get_text() for t in legend.get_texts()} == {str(k.bound) for p in preds
                                                          for k in p.kernels}
    assert legend.get_bbox_to_anchor().x0 > ax.get_window_extent().x1 - 1
    names = [t for t in ax.texts if not t.get_text().endswith("ms")]
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    boxes = [t.get_window_extent(renderer) for t in names]
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    fig, ax = plots.time_by_unit(preds, by="unit")
    _png(fig, tmp_path / "time_units.png")
    with pytest.raises(perfsim.PerfsimError):
        plots.time_by_unit(preds, by="colour")


def test_unit_times(tmp_path):
    w = W.replace(dtype="bf16", seqlen_q=8192)
    preds = [perfsim.predict(w.replace(head_dim=d), "h200-sxm", "fa2") for d in (64, 128)]
    fig, ax = plots.unit_times(preds, scale=preds[0].gpu.clock_hz, unit_label="cycles")
    _png(fig, tmp_path / "units.png")
    assert len(ax.patches) == 10 and len(ax.get_yticklabels()) == 2   # one group per prediction


def test_tflops_vs_seqlen_panels_and_series(tmp_path, frame):
    fig, axes = plots.tflops_vs_seqlen(frame)
    _png(fig, tmp_path / "tflops.png")
    assert axes.shape == (2, 4)   # GPUs x (causal, head_dim)
    # one legend, beside the top-right panel, naming every series of every panel
    legends = [ax.get_legend() for ax in axes.ravel() if ax.get_legend()]
    assert len(legends) == 1 and axes[0, -1].get_legend() is legends[0]
    assert {t.get_text() for t in legends[0].get_texts()} == {"standard", "fa2", "fa3"}
    many = perfsim.sweep(batch=1, heads=8, seqlen_q=[2**i for i in range(7, 17)],
                         head_dim=128, gpus="h200-sxm", algorithms=["fa2", "fa3"])
    fig, ax = plots.tflops_vs_seqlen(many)   # more than 8 lengths: one line per algorithm
    _png(fig, tmp_path / "lines.png")
    assert len(ax.lines) == 2 and ax.get_xscale() == "log"


def test_bar_labels_keep_two_figures_below_ten_tflops(tmp_path):
    """A fresh user's report: a decode sweep's bars under 0.5 TFLOP/s were labelled "0"."""
    decode = perfsim.sweep(batch=1, heads=8, seqlen_q=1, seqlen_k=[1024, 4096], head_dim=128,
                           gpus="h200-sxm", algorithms="fa2")
    fig, ax = plots.tflops_vs_seqlen(decode, x="seqlen_k")
    _png(fig, tmp_path / "decode.png")
    labels = [t.get_text() for t in ax.texts]
    assert labels and "0" not in labels
    assert all(float(t) > 0 for t in labels), labels


def test_bottleneck_map(tmp_path, frame):
    fig, axes = plots.bottleneck_map(frame[~frame.causal])
    _png(fig, tmp_path / "map.png")
    assert axes.shape == (2, 3)
    # causal varies too: a row of panels per (GPU, causal) instead of a refusal; every cell
    # one row, labelled with its TFLOP/s, and the legend says what the numbers are
    fig, axes = plots.bottleneck_map(frame)
    _png(fig, tmp_path / "map_causal.png")
    assert axes.shape == (4, 3)
    assert {ax.get_title() for ax in axes[:, 0]} == {
        f"{g}, causal={c}, standard" for g in ("a100-sxm4-80gb", "h200-sxm")
        for c in (False, True)}
    labels = sorted(float(t.get_text()) for ax in axes.ravel() for t in ax.texts)
    ok = frame[frame.infeasible == ""]
    assert labels == sorted(float(_tflops_label(v)) for v in ok.tflops)
    legend = axes[0, -1].get_legend()
    assert "TFLOP/s" in legend.get_title().get_text()
    assert "infeasible" in {t.get_text() for t in legend.get_texts()}   # fa3 on the A100
    with pytest.raises(perfsim.PerfsimError, match="no column 'seqlen'"):
        plots.bottleneck_map(frame, x="seqlen")


def test_predicted_vs_measured(tmp_path, frame):
    ok = frame[frame.infeasible == ""]
    rng = np.random.default_rng(0)
    df = ok.assign(predicted_s=ok.seconds, measured_s=ok.seconds * rng.uniform(0.8, 1.3, len(ok)))
    fig, ax = plots.predicted_vs_measured(df)
    _png(fig, tmp_path / "scatter.png")
    assert "median" in ax.get_title()
    with pytest.raises(perfsim.PerfsimError, match="measured_s"):
        plots.predicted_vs_measured(ok)


def test_winner_map_marks_the_fastest_algorithm(tmp_path, frame):
    part = frame[frame.causal]
    fig, axes = plots.winner_map(part)
    _png(fig, tmp_path / "winners.png")
    assert axes.shape == (2,)
    ok = part[part.infeasible == ""]
    best = ok.loc[ok.groupby(["gpu", "seqlen_q", "head_dim"], observed=True).seconds.idxmin()]
    labels = sorted(float(t.get_text()) for ax in axes for t in ax.texts)
    assert labels == sorted(round(v) for v in best.tflops)


def test_maps_plot_a_sweep_read_back_from_csv(tmp_path, frame):
    """A fresh user's report: a sweep read back with a plain pd.read_csv (its empty
    'infeasible' and 'bound' cells as NaN) crashed bottleneck_map and drew an empty
    winner_map; the maps now read it as the sweep's own frame."""
    import pandas as pd

    path = tmp_path / "rows.csv"
    frame.to_csv(path, index=False)
    back = pd.read_csv(path)
    assert back.infeasible.isna().any()
    fig, axes = plots.winner_map(back[back.causal])
    _png(fig, tmp_path / "winners_csv.png")
    assert sum(len(ax.texts) for ax in axes) > 0
    fig, _ = plots.bottleneck_map(back[~back.causal])
    _png(fig, tmp_path / "map_csv.png")
    # fits_memory is empty on infeasible rows (a nullable boolean): read back as objects,
    # the plots take it as the boolean it was
    from perfsim.plots.sweep import _as_swept

    assert back.fits_memory.isna().any() and back.fits_memory.dtype == object
    assert _as_swept(back).fits_memory.dtype == "boolean"
    fig, _ = plots.tflops_vs_seqlen(back)
    _png(fig, tmp_path / "tflops_csv.png")


def test_cycle_chart_of_tile_cycles(tmp_path):
    rows = {"H100": {"mma": 2048, "exp": 1024}, "B200": {"mma": 1024, "exp": 1024, "smem": 768}}
    fig, ax = plots.cycle_chart(rows, title="one 128 x 128 tile, d = 128")
    _png(fig, tmp_path / "cycles.png")
    assert [b.get_width() for b in ax.patches] == [2048, 1024, 1024, 1024, 768]


def test_maps_and_curves_facet_inference_fields_and_cap_panels(tmp_path):
    """window (and kv_dtype, page_size, softcap) vary like any workload field: a row of panels
    each in the maps, a series each in the curve (never averaged); too many panels are
    refused with the fields to filter on."""
    df = perfsim.sweep(batch=1, heads=16, seqlen_q=[1024, 2048, 4096], head_dim=[64, 128],
                       window=[(255, 0), ("none", "none")], gpus=["h200-sxm"],
                       algorithms=["fa2"])
    fig, axes = plots.bottleneck_map(df)
    assert axes.shape == (2,)
    assert {ax.get_title() for ax in axes} == {"window=255,0", "window=none"}
    fig, axes = plots.tflops_vs_seqlen(df)
    labels = {t.get_text() for ax in np.ravel(axes) if ax.get_legend()
              for t in ax.get_legend().get_texts()}
    assert labels == {"fa2, window=255,0", "fa2, window=none"}
    many = perfsim.sweep(batch=list(range(1, 51)), heads=8, seqlen_q=[512, 1024],
                         head_dim=64, gpus=["h100-sxm5"], algorithms=["fa2"])
    with pytest.raises(perfsim.PerfsimError, match="panels .*batch"):
        plots.bottleneck_map(many)


def test_roofline_labels_do_not_overlap(tmp_path):
    """Ten presets on one roofline: the kernel labels are moved apart until no two boxes
    overlap (or left where no free place was found within twelve steps: none here)."""
    w = perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=4096, head_dim=128)
    from perfsim.implementations import implementations

    preds = []
    for name in implementations():
        try:
            preds.append(perfsim.predict(w, "h200-sxm", name))
        except perfsim.InfeasibleError:
            pass
    fig, ax = plots.roofline(preds)
    _png(fig, tmp_path / "roofline_presets.png")
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    boxes = [t.get_window_extent(renderer) for t in ax.texts]
    assert len(boxes) > 8
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def test_predicted_vs_measured_refuses_what_it_cannot_draw():
    import numpy as np
    import pandas as pd

    from perfsim.plots import predicted_vs_measured

    good = pd.DataFrame({"predicted_s": [1e-3, 2e-3, np.nan, 1e-3],
                         "measured_s": [1.1e-3, 2e-3, 1e-3, 0.0], "algorithm": list("aabb")})
    fig, ax = predicted_vs_measured(good)
    assert "(n=2)" in ax.get_title()                 # the NaN prediction and zero time left out
    with pytest.raises(perfsim.PerfsimError, match="no column algorithm"):
        predicted_vs_measured(good.drop(columns="algorithm"))
    predicted_vs_measured(good.drop(columns="algorithm"), hue=None)
    with pytest.raises(perfsim.PerfsimError, match="no row with a finite, positive"):
        predicted_vs_measured(good.iloc[2:])


def test_tflops_plot_refuses_more_series_than_a_legend_holds(tmp_path, capsys):
    """A 96-series decode sweep drew collapsed axes with a raw matplotlib warning; the rows an
    --out sweep wrote stay written and the error says so."""
    from perfsim.cli import main

    cfg = tmp_path / "d.toml"
    cfg.write_text('gpus = ["h100-sxm5"]\nalgorithms = ["fa2", "fa3", "sdpa-cudnn", '
                   '"flash-attn-cute"]\n[workload]\nbatch = [1, 8, 64]\nheads = [32]\n'
                   'kv_heads = [8, 32]\nseqlen_q = [1, 4, 16]\n'
                   'seqlen_k = [1024, 8192, 32768, 131072]\nhead_dim = [128]\n')
    out = tmp_path / "rows.csv"
    assert main(["sweep", str(cfg), "--out", str(out), "--plot", str(tmp_path / "f.png"),
                 "--plot-kind", "tflops"]) == 2
    err = capsys.readouterr().err
    assert f"wrote rows to {out}; no figure: 96 series per panel" in err
    assert out.stat().st_size > 0 and not (tmp_path / "f.png").exists()
