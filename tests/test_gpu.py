"""The GPU catalog and GPUSpec."""

from __future__ import annotations

import tomllib

import pytest

import perfsim
from perfsim.gpu import GPUSpec

CATALOG = ["a100-sxm4-80gb", "h100-sxm5", "h200-sxm", "b200", "rtx-5090"]
#: datasheet dense BF16 peaks (TFLOP/s): P2 §3.1, P3 §3.1, P4 §2.2, RTX Blackwell whitepaper
BF16_PEAKS = {"a100-sxm4-80gb": 312, "h100-sxm5": 989, "h200-sxm": 989, "b200": 2250,
              "rtx-5090": 209.5}


def test_catalog_lists_the_five_gpus():
    assert set(CATALOG) <= set(perfsim.gpus())


@pytest.mark.parametrize("gpu", CATALOG)
def test_bf16_peak_matches_datasheet(gpu):
    spec = perfsim.load_gpu(gpu)
    assert spec.peak_tensor_flops_per_s("bf16") / 1e12 == pytest.approx(BF16_PEAKS[gpu],
                                                                        rel=0.01)


@pytest.mark.parametrize("gpu", perfsim.gpus())
def test_every_number_has_a_source(gpu):
    spec = perfsim.load_gpu(gpu)
    for name, value in spec.model_dump().items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            assert name in spec.sources, f"{gpu}: {name} has no source"
        if isinstance(value, dict) and name not in ("sources", "calibration"):
            for key in value:
                assert f"{name}.{key}" in spec.sources or name in spec.sources, \
                    f"{gpu}: {name}.{key} has no source"


def test_unknown_id_lists_the_valid_ones():
    with pytest.raises(perfsim.PerfsimError, match="valid ids: .*h100-sxm5"):
        perfsim.load_gpu("h900")


def test_replace_gives_a_validated_what_if():
    b300 = perfsim.load_gpu("b200").replace(mufu_ops_per_clk_per_sm=32, id="b300-like")
    assert b300.mufu_ops_per_s == 2 * perfsim.load_gpu("b200").mufu_ops_per_s
    unnamed = perfsim.load_gpu("b200").replace(mufu_ops_per_clk_per_sm=32)
    assert unnamed.id == "b200*" and "what-if: mufu_ops_per_clk_per_sm" in unnamed.name
    assert perfsim.load_gpu("b200").replace(calibration={"note": "x"}).id == "b200"
    with pytest.raises(perfsim.PerfsimError, match="hbm_bandwidth_bytes_per_s"):
        perfsim.load_gpu("b200").replace(hbm_bandwidth_bytes_per_s=-1)
    with pytest.raises(perfsim.PerfsimError, match="no field"):
        perfsim.load_gpu("b200").replace(hbm_tbps=8)


def test_a_what_if_says_where_its_changed_numbers_come_from():
    """A replaced number no longer has the catalog's source (a fresh user's review: `gpu show`
    and explain() quoted the catalog's datasheet for a what-if value): each changed value,
    entry by entry in a table, says it is a what-if; unchanged values keep their sources;
    sources given with the change are merged over the result."""
    h200 = perfsim.load_gpu("h200-sxm")
    tensor = {**h200.tensor_flops_per_clk_per_sm, "bf16": 1024.0}
    what_if = h200.replace(sm_count=100, tensor_flops_per_clk_per_sm=tensor,
                           clock_hz=h200.clock_hz)
    assert what_if.sources["sm_count"].startswith("what-if") and "was 132" in \
        what_if.sources["sm_count"]
    assert what_if.sources["tensor_flops_per_clk_per_sm.bf16"].startswith("what-if")
    for kept in ("tensor_flops_per_clk_per_sm.fp16", "clock_hz", "hbm_bandwidth_bytes_per_s"):
        assert what_if.sources[kept] == h200.sources[kept]
    cleared = h200.replace(tma_segment_seconds=None)
    assert cleared.sources["tma_segment_seconds"].startswith("what-if") and \
        "was a table" in cleared.sources["tma_segment_seconds"]
    assert not any(k.startswith("tma_segment_seconds.") for k in cleared.sources)
    mine = h200.replace(sm_count=100, sources={"sm_count": "mine"}).sources
    assert mine["sm_count"] == "mine" and mine["clock_hz"] == h200.sources["clock_hz"]


def test_spec_is_frozen():
    spec = perfsim.load_gpu("h100-sxm5")
    with pytest.raises(perfsim.PerfsimError, match="immutable"):
        spec.sm_count = 1


def test_load_from_a_toml_path(tmp_path):
    from perfsim.validate.tomlwrite import dumps

    src = perfsim.load_gpu("h200-sxm").model_dump()
    src["id"] = "my-h200"
    path = tmp_path / "my.toml"
    path.write_text(dumps(src))
    tomllib.loads(path.read_text())
    assert perfsim.load_gpu(str(path)).id == "my-h200"
    assert perfsim.load_gpu(str(path)).power == perfsim.load_gpu("h200-sxm").power


def test_a_misspelt_key_is_named_beside_the_field_it_leaves_missing(tmp_path):
    """A GPU file whose required key is misspelt said only that the field was missing (a
    fresh user's report); the key the spec does not take is named beside it."""
    from perfsim.validate.tomlwrite import dumps

    src = perfsim.load_gpu("h100-sxm5").model_dump()
    src["id"] = "my-h100"
    src["hbm_eficiency"] = src.pop("hbm_efficiency")
    path = tmp_path / "typo.toml"
    path.write_text(dumps(src))
    with pytest.raises(perfsim.PerfsimError, match=r"hbm_efficiency: Field required \(the "
                       r"file has a key no GPU spec takes: 'hbm_eficiency'; misspelt\? perhaps "
                       r"'hbm_eficiency' for 'hbm_efficiency'\)"):
        perfsim.load_gpu(str(path))


def test_a_file_that_keeps_a_catalog_id_with_other_values_is_warned_about(tmp_path):
    """An edited copy of a catalog file keeps its id, so its results were labelled as the
    catalog GPU without a word (a fresh user's report): it warns once; an unedited copy
    does not."""
    import warnings

    from perfsim.validate.tomlwrite import dumps

    src = perfsim.load_gpu("h100-sxm5").model_dump()
    same = tmp_path / "same.toml"
    same.write_text(dumps(src))
    src["hbm_efficiency"] = 0.7
    edited = tmp_path / "edited.toml"
    edited.write_text(dumps(src))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert perfsim.load_gpu(str(same)) == perfsim.load_gpu("h100-sxm5")
    with pytest.warns(UserWarning, match="its id 'h100-sxm5' is a catalog GPU's, but its "
                      "values differ"):
        assert perfsim.load_gpu(str(edited)).hbm_efficiency == 0.7
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        perfsim.load_gpu(str(edited))                   # once per version of a file
    # an unedited copy checked first, then edited in the same process: the edit is warned
    # about (a reviewer's finding: the first check had marked the file for good)
    import os

    src["hbm_efficiency"] = 0.75
    same.write_text(dumps(src))
    stat = same.stat()
    os.utime(same, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    with pytest.warns(UserWarning, match="values differ"):
        assert perfsim.load_gpu(str(same)).hbm_efficiency == 0.75


def test_missing_feature_raises_infeasible():
    a100 = perfsim.load_gpu("a100-sxm4-80gb")
    with pytest.raises(perfsim.InfeasibleError, match="WGMMA"):
        a100.tensor_flops_per_clk("bf16", "wgmma")
    with pytest.raises(perfsim.InfeasibleError, match="fp8_e4m3"):
        a100.tensor_flops_per_clk("fp8_e4m3", "mma_sync")


def test_threads_per_sm_limit_residency_like_warp_slots():
    """max_threads_per_sm is an occupancy limit (CUDA's resident threads per SM) beside the
    warp slots: a what-if that lowers it alone makes a CTA that no longer fits infeasible and
    lowers how many CTAs share an SM; the catalog's (32 threads per warp slot) changes
    nothing (a fresh user's report: the field was validated and never read)."""
    w = perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=2048, head_dim=128)
    h100 = perfsim.load_gpu("h100-sxm5")
    assert h100.max_threads_per_sm == 32 * h100.max_warps_per_sm
    few = h100.replace(max_threads_per_sm=128, id="few-threads")
    with pytest.raises(perfsim.InfeasibleError, match="384 threads"):
        perfsim.predict(w, few, "fa3")
    cost = perfsim.predict(w, few, "fa2").kernels[0].cost
    assert cost.warps_per_cta == 4 and cost.ctas_per_sm == 1     # 128 threads: one CTA
    assert perfsim.predict(w, h100, "fa2").kernels[0].cost.ctas_per_sm == 2


def test_gpuspec_rejects_bad_dtype_key():
    data = perfsim.load_gpu("h100-sxm5").model_dump()
    data["tensor_flops_per_clk_per_sm"]["fp4"] = 1.0
    with pytest.raises(ValueError, match="unknown dtype"):
        GPUSpec.model_validate(data)


def test_calibration_block_is_typed():
    """The timing keys of a calibrated profile are parsed into CalibratedTiming (numbers in
    range), the rest stays provenance text; a bad value is one clear error."""
    from perfsim.errors import PerfsimError
    from perfsim.gpu import CalibratedTiming

    cal = CalibratedTiming.of({"launch_overhead_s": "4.1e-06", "eager_softmax_4096": "1.2e12",
                               "eager_softmax_128": "2.3e12", "device": "NVIDIA H200"})
    assert cal.launch_overhead_s == pytest.approx(4.1e-6)
    assert cal.eager_softmax == ((128, 2.3e12), (4096, 1.2e12))
    with pytest.raises(PerfsimError, match=r"\[calibration\]"):
        CalibratedTiming.of({"cta_overhead_s": "fast"})
    with pytest.raises(PerfsimError, match=r"\[calibration\]"):
        CalibratedTiming.of({"cta_overhead_s": "-1"})
    from pathlib import Path

    spec = perfsim.load_gpu(Path(__file__).resolve().parent.parent
                            / "validate/profiles/h200-sxm-calibrated.toml")
    assert CalibratedTiming.of(spec.calibration).cta_overhead_s > 0


@pytest.mark.parametrize("name, gid", [
    ("NVIDIA H200", "h200-sxm"), ("NVIDIA H100 80GB HBM3", "h100-sxm5"),
    ("NVIDIA H100 PCIe", "h100-pcie"), ("NVIDIA A100-SXM4-40GB", "a100-sxm4-40gb"),
    ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb"), ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb"),
    ("NVIDIA GeForce RTX 4090", "rtx-4090"), ("NVIDIA GH200 480GB", "gh200"),
    ("NVIDIA B200", "b200"), ("NVIDIA GB200", "gb200"), ("NVIDIA H20", "h20"),
    ("NVIDIA GeForce RTX 5090", "rtx-5090")])
def test_device_names_map_to_catalog_entries(name, gid):
    from perfsim.gpu_catalog import catalog_id_for

    assert catalog_id_for(name) == gid


@pytest.mark.parametrize("name", ["NVIDIA H100 NVL", "NVIDIA A100 80GB PCIe",
                                  "NVIDIA GeForce RTX 4090 D", "NVIDIA Tesla K80",
                                  # other boards of a catalog chip (a fresh user's report):
                                  # more memory and bandwidth, or a cut tensor rate
                                  "NVIDIA H20-3e", "NVIDIA GH200 144G HBM3e",
                                  "NVIDIA GeForce RTX 5090 D", "NVIDIA GeForce RTX 5090 D v2"])
def test_boards_the_catalog_lacks_are_refused_not_mapped_to_a_neighbour(name):
    from perfsim.errors import PerfsimError
    from perfsim.gpu_catalog import catalog_id_for

    with pytest.raises(PerfsimError, match="no catalog entry"):
        catalog_id_for(name)


def test_every_catalog_entry_names_its_device():
    assert all(perfsim.load_gpu(g).device_name_pattern for g in perfsim.gpus())


def test_gpu_auto_uses_the_detected_gpu_and_refuses_an_unknown_one(monkeypatch):
    from perfsim import gpu_catalog as gpu_module
    from perfsim.errors import PerfsimError

    monkeypatch.setattr(gpu_module, "detect_gpu", lambda: "h200-sxm")
    assert perfsim.load_gpu("auto").id == "h200-sxm"
    with pytest.raises(PerfsimError, match="no catalog entry"):
        gpu_module.catalog_id_for("NVIDIA Tesla K80")


def test_a_wrong_type_in_a_gpu_file_is_named_once(tmp_path):
    """'... not str 'lots', got 'lots'' named the value twice."""
    import re

    from perfsim.errors import PerfsimError
    from perfsim.gpu_catalog import load_gpu

    with pytest.raises(PerfsimError) as err:
        load_gpu("h100-sxm5").replace(sm_count="lots")
    assert str(err.value).count("'lots'") == 1
    assert re.search(r"sm_count: must be an integer of SMs, from 1 to 4096, not str 'lots'$",
                     str(err.value))


def test_a_device_name_pattern_must_compile():
    """Review finding: an invalid regular expression was accepted and failed only in
    ``--gpu auto``."""
    import perfsim

    with pytest.raises(perfsim.PerfsimError, match="device_name_pattern: must be a regular"):
        perfsim.load_gpu("h100-sxm5").replace(device_name_pattern="(")


def test_replace_changes_one_table_entry_by_its_dotted_name():
    from perfsim import PerfsimError, load_gpu
    # as a sweep's overrides do; a dict replaces the whole table (the other dtypes went,
    # and an fp16 call on the what-if became infeasible)
    g = load_gpu("h100-sxm5")
    one = g.replace(**{"tensor_flops_per_clk_per_sm.bf16": 8192})
    assert one.tensor_flops_per_clk_per_sm == {**g.tensor_flops_per_clk_per_sm, "bf16": 8192}
    assert g.replace(**{"power.tdp_w": 600}).power == g.power.model_copy(
        update={"tdp_w": 600.0})
    with pytest.raises(PerfsimError, match="names no entry of a table field"):
        g.replace(**{"sm_count.x": 1})
    # the table given whole (a model, a dict) and by entry: the entry over it
    assert g.replace(power=g.power, **{"power.tdp_w": 600}).power.tdp_w == 600
    with pytest.raises(PerfsimError, match="give the table whole"):
        g.replace(power=None, **{"power.tdp_w": 600})


def test_mma_sync_never_outruns_the_native_tensor_rate():
    """A what-if that lowers the native (WGMMA) rate below the mma.sync rate slows FA2's
    mma.sync kernels too: the same tensor cores run both, and no prediction may beat the
    what-if GPU's matmul peak. Above the mma.sync rate the native rate does not touch it."""
    import perfsim

    w = perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=4096, head_dim=128)
    base = perfsim.load_gpu("h100-sxm5")
    mma = base.mma_sync_flops_per_clk_per_sm["bf16"]
    assert mma < base.tensor_flops_per_clk_per_sm["bf16"]
    same = base.replace(**{"tensor_flops_per_clk_per_sm.bf16": mma + 1}, id="x1")
    assert same.tensor_flops_per_clk("bf16", "mma_sync") == mma
    slow = base.replace(**{"tensor_flops_per_clk_per_sm.bf16": 64})
    assert slow.tensor_flops_per_clk("bf16", "mma_sync") == 64
    assert slow.mma_sync_flops_per_clk_per_sm["fp16"] == mma          # other dtypes kept
    assert "capped" in slow.sources["mma_sync_flops_per_clk_per_sm.bf16"]
    assert "mma_sync_flops_per_clk_per_sm" in slow.name               # listed as changed
    # both given: the caller's mma.sync rate stands; a profile's own values are not touched
    both = base.replace(**{"tensor_flops_per_clk_per_sm.bf16": 64,
                           "mma_sync_flops_per_clk_per_sm.bf16": 128}, id="x3")
    assert both.mma_sync_flops_per_clk_per_sm["bf16"] == 128
    # a sweep's what-if takes the same path
    df = perfsim.sweep(batch=4, heads=16, seqlen_q=4096, head_dim=128, gpus="h100-sxm5",
                       algorithms=["fa2"],
                       overrides={"tensor_flops_per_clk_per_sm.bf16": {"scale": [1, 0.05]}})
    assert (df.tflops * 1e12 <= 0.05 * base.peak_tensor_flops_per_s("bf16") * 1.0001).sum() == 1
    for algo in ("fa2", "sdpa-flash", "fa1"):
        p = perfsim.predict(w, gpu=slow, algorithm=algo)
        assert p.executed_flops / p.seconds <= p.peak_flops_per_s
        assert p.seconds > 10 * perfsim.predict(w, gpu=base, algorithm=algo).seconds


def test_a_tensor_table_dropped_or_malformed_in_a_what_if():
    """A fresh user's reports: a dtype dropped from the native table left FA2's mma.sync path
    at full speed on Hopper and Blackwell (an empty table refused FA3 and standard, not
    FA2), and a table given as a number, a list or a string crashed ``replace`` with an
    AttributeError (a traceback from ``perfsim sweep``)."""
    import perfsim

    w = perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=1024, head_dim=128)
    for gpu in ("h100-sxm5", "b200"):
        base = perfsim.load_gpu(gpu)
        empty = base.replace(tensor_flops_per_clk_per_sm={})
        assert empty.mma_sync_flops_per_clk_per_sm == {}
        assert "removed" in empty.sources["mma_sync_flops_per_clk_per_sm.bf16"]
        for algo in ("fa2", "sdpa-flash", "standard"):
            with pytest.raises(perfsim.PerfsimError, match="tensor-core path for bf16"):
                perfsim.predict(w, gpu=empty, algorithm=algo)
        # a dtype kept keeps its mma.sync rate
        fp16 = base.replace(tensor_flops_per_clk_per_sm={
            "fp16": base.tensor_flops_per_clk_per_sm["fp16"]})
        assert set(fp16.mma_sync_flops_per_clk_per_sm) == {"fp16"}
        assert (fp16.mma_sync_flops_per_clk_per_sm["fp16"]
                == base.mma_sync_flops_per_clk_per_sm["fp16"])
    base = perfsim.load_gpu("h100-sxm5")
    for bad in (8192, [8192], "fast"):
        with pytest.raises(perfsim.PerfsimError, match="must be a table of dtype"):
            base.replace(tensor_flops_per_clk_per_sm=bad)
    df = perfsim.sweep(batch=4, heads=16, seqlen_q=1024, head_dim=128, gpus="h100-sxm5",
                       algorithms="fa2", overrides={"tensor_flops_per_clk_per_sm": [8192]})
    assert "must be a table of dtype" in df.infeasible.iloc[0]


def test_an_invalid_what_if_names_every_field_that_fails():
    """A fresh user's report: a what-if with two bad values named only one, so fixing it
    met the next error. The message leads with one and lists the others."""
    from perfsim.errors import PerfsimError
    from perfsim.gpu_catalog import load_gpu

    with pytest.raises(PerfsimError, match=r"clock_hz: .*also invalid: "
                                           r"hbm_bandwidth_bytes_per_s\)"):
        load_gpu("h100-sxm5").replace(hbm_bandwidth_bytes_per_s=0, clock_hz=-1)


def test_gh100_parts_quote_the_h200_energies_at_its_reference_clock():
    """The GH100 entries take the H200's measured energies per operation (the same SM): they
    must quote them at the clock they were measured at. The H100 PCIe quoted them at its own
    1755 MHz top clock, charging 1980-MHz energies there (a fresh user's review)."""
    from perfsim.validate.fit_power import GH100

    h200 = perfsim.load_gpu("h200-sxm").power
    for gid in GH100:
        p = perfsim.load_gpu(gid).power
        assert p.reference_clock_hz == h200.reference_clock_hz, gid
        assert p.tensor_pj_per_flop == h200.tensor_pj_per_flop, gid


def test_a_known_arch_label_must_agree_with_the_compute_capability():
    """A fresh user's report: ``arch = "volta"`` was taken on a Hopper spec and changed
    nothing (the label is for messages). A known label must now match the compute capability;
    a label perfsim does not know (a hypothetical part's) is taken as it is."""
    from perfsim.gpu import ARCH_COMPUTE_CAPABILITIES, compute_capability_numbers

    for gid in perfsim.gpus():          # the catalog agrees with its own labels
        g = perfsim.load_gpu(gid)
        lo, hi = ARCH_COMPUTE_CAPABILITIES[g.arch]
        assert lo <= compute_capability_numbers(g.compute_capability) <= hi, gid
    h100 = perfsim.load_gpu("h100-sxm5")
    for label in ("volta", "Ampere", "blackwell"):
        with pytest.raises(perfsim.PerfsimError, match="arch .* not this spec's 9.0 "):
            h100.replace(arch=label)
    assert h100.replace(arch="rubin").arch == "rubin"
    assert h100.replace(arch="ampere", compute_capability="8.0").arch == "ampere"
