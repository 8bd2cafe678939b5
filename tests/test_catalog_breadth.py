"""The ten GPUs added for catalog breadth: they load, every number has a source, and each
dense BF16 peak matches the datasheet figure the file cites (within 1 %)."""

from __future__ import annotations

import pytest

import perfsim

#: dense BF16 (FP32-accumulate) tensor peaks in TFLOP/s, with the source each file cites
DATASHEET_BF16_TFLOPS = {
    "h100-pcie": 1513 / 2,        # NVIDIA H100 datasheet, PCIe column: 1513 with sparsity (HPCT)
    "h20": 148,                   # NVIDIA HGX H20 spec, FP16/BF16 dense (H20S)
    "l40s": 362.05,               # NVIDIA L40S datasheet: 362.05 dense / 733 with sparsity
    "a10g": 70,                   # A10G FP16 tensor, FSDL cloud-GPU table citing the A10G datasheet
    "rtx-4090": 165.2,            # NVIDIA Ada whitepaper, RTX 4090: FP16/BF16 with FP32 accumulate
    "rtx-3090": 71,               # NVIDIA GA102 whitepaper App. A, RTX 3090: BF16, FP32 accum.
    "a100-pcie-40gb": 312,        # NVIDIA A100 datasheet (PCIe = SXM4 peaks); P2 §3.1
    "gh200": 989,                 # GH200's Hopper GPU = H100 SXM5 compute (P3 §3.1: 989 TFLOPS)
    "b300": 2250,                 # HGX B300, dense BF16 (Glenn Lockwood's B300 notes, GK-B300)
    "gb200": 5000 / 2,            # GB200 NVL72 datasheet, per GPU: 5 PFLOPS with sparsity
}
NEW = sorted(DATASHEET_BF16_TFLOPS)


def _source_keys(spec):
    """Every numeric field and every entry of a table field, as its [sources] key."""
    keys = []
    for name, value in spec.model_dump().items():
        if name in ("sources", "calibration", "features"):
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            keys.append(name)
        elif isinstance(value, dict):
            for key, inner in value.items():
                keys.append(f"{name}.{key}")
                if isinstance(inner, dict):     # power.tensor_pj_per_flop.<family>
                    keys += [f"{name}.{key}.{k}" for k in inner]
    keys += [f"features.{k}" for k in spec.features.model_dump()]
    return keys


def test_the_ten_are_in_the_catalog():
    assert set(NEW) <= set(perfsim.gpus())


@pytest.mark.parametrize("gpu", NEW)
def test_loads_with_id_equal_to_file(gpu):
    spec = perfsim.load_gpu(gpu)
    assert spec.id == gpu
    assert spec.power is not None
    # GH100 parts quote the H200's energies at the clock they were measured at (1980 MHz);
    # the others at their own top clock (validate/fit_power.py catalog_power)
    from perfsim.validate.fit_power import GH100

    want = (perfsim.load_gpu("h200-sxm").power.reference_clock_hz if gpu in GH100
            else spec.max_clock_hz)
    assert spec.power.reference_clock_hz == want


@pytest.mark.parametrize("gpu", NEW)
def test_every_field_and_table_entry_has_a_nonempty_source(gpu):
    spec = perfsim.load_gpu(gpu)
    for key in _source_keys(spec):
        assert spec.sources.get(key, "").strip(), f"{gpu}: {key} has no source"
    for key, text in spec.sources.items():
        assert text.strip(), f"{gpu}: empty source for {key}"
        assert "shared/reference" not in text, f"{gpu}: {key} cites a file outside the repo"


@pytest.mark.parametrize("gpu", NEW)
def test_bf16_peak_matches_datasheet(gpu):
    spec = perfsim.load_gpu(gpu)
    assert spec.peak_tensor_flops_per_s("bf16") / 1e12 == pytest.approx(
        DATASHEET_BF16_TFLOPS[gpu], rel=0.01)


@pytest.mark.parametrize("gpu", NEW)
def test_family_and_features_agree_with_the_compute_capability(gpu):
    spec = perfsim.load_gpu(gpu)
    family = {"8.0": "mma_sync", "8.6": "mma_sync", "8.9": "mma_sync", "9.0": "wgmma",
              "10.0": "tcgen05", "10.3": "tcgen05"}[spec.compute_capability]
    assert spec.native_tensor_family == family
    assert spec.features.wgmma == (family == "wgmma")
    assert spec.features.tma == (family != "mma_sync")     # TMA from CC 9.0 (PG Table 29)
    assert spec.features.tcgen05 == spec.features.two_cta == (family == "tcgen05")
    assert (spec.tmem_bytes_per_sm > 0) == (family == "tcgen05")
    has_fp8 = spec.compute_capability not in ("8.0", "8.6")   # PG Table 33: FP8 from CC 8.9
    assert ("fp8_e4m3" in spec.tensor_flops_per_clk_per_sm) == has_fp8
    if family == "mma_sync":   # Ampere/Ada: mma.sync is the native instruction
        assert spec.mma_sync_flops_per_clk_per_sm == spec.tensor_flops_per_clk_per_sm


def test_b300_mufu_is_32_per_clock_per_sm():
    """FA4 §2.2: MUFU doubles on Blackwell Ultra (B300/GB300) to 32 ops/clk/SM."""
    assert perfsim.load_gpu("b300").mufu_ops_per_clk_per_sm == 32
    assert perfsim.load_gpu("gb200").mufu_ops_per_clk_per_sm == 16


def test_geforce_tensor_rates_are_the_fp32_accumulate_half_rate():
    """GeForce Ampere/Ada: FP32 accumulation at half the FP16-accumulate rate; the datacenter
    L40S keeps the full rate (its datasheet's 362 TFLOPS on 142 SMs)."""
    for gpu in ("rtx-3090", "rtx-4090"):
        assert perfsim.load_gpu(gpu).tensor_flops_per_clk_per_sm["bf16"] == 512
    assert perfsim.load_gpu("l40s").tensor_flops_per_clk_per_sm["bf16"] == 1024
