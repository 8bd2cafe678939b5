"""Shared fixtures: a 'unit' GPU on which every rate is 1, so times equal counts. And the
notebooks: where nbmake is installed (the dev extra), ``python -m pytest`` executes every
notebook in notebooks/ as a test item of its own (marked ``notebooks``)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile

import pytest

from perfsim.gpu import GPUSpec

UNIT_RATES = {"fp16": 1.0, "bf16": 1.0, "fp8_e4m3": 1.0, "tf32": 1.0}


def unit_gpu(**overrides) -> GPUSpec:
    """One SM at 1 Hz; every unit does 1 FLOP/op/byte per clock; HBM 1 byte/s.

    Capacities are large so that no configuration is infeasible and the L2 holds
    every working set (re-reads are L2 hits) unless overridden.
    """
    data = dict(
        id="unit", name="unit GPU", arch="test", compute_capability="0.0", sm_count=1,
        clock_hz=1.0, max_clock_hz=1.0, native_tensor_family="mma_sync",
        tensor_flops_per_clk_per_sm=UNIT_RATES, mma_sync_flops_per_clk_per_sm=UNIT_RATES,
        fp32_flops_per_clk_per_sm=1.0, mufu_ops_per_clk_per_sm=1.0, alu_ops_per_clk_per_sm=1.0,
        smem_bandwidth_bytes_per_clk_per_sm=1.0, smem_bytes_per_sm=2**30,
        smem_bytes_per_block=2**30, registers_per_sm=2**30, max_registers_per_thread=255,
        max_warps_per_sm=64, max_ctas_per_sm=1, max_threads_per_sm=2048, l2_bytes=2**50,
        l2_usable_fraction=1.0, hbm_bytes=2**50, hbm_bandwidth_bytes_per_s=1.0,
        hbm_efficiency=1.0,
        tmem_bytes_per_sm=2**20, load_latency_s=1.0, cta_load_bandwidth_bytes_per_s=1.0,
        cta_wave_overhead_s=0.0,
        features={"tma": True, "wgmma": False, "tcgen05": False, "two_cta": False},
        sources={"all": "test fixture: every rate 1"},
    )
    data.update(overrides)
    # a 1 Hz, 1 B/s device is outside GPUSpec's plausible ranges (FIELD_RANGES) on purpose
    return GPUSpec.model_validate(data, context={"unchecked_ranges": True})


@pytest.fixture
def unit() -> GPUSpec:
    return unit_gpu()


_KERNEL_CACHE: list[str] = []


def pytest_configure(config):
    # nbmake collects notebooks/*.ipynb (a testpath) when its option is on; turned on here so
    # the one README command runs them, and left off where nbmake is not installed
    if importlib.util.find_spec("nbmake") is not None and hasattr(config.option, "nbmake"):
        config.option.nbmake = True
    # compiled kernels go to a cache of this run's own (perfsim.compiled.kernel_cache_dir),
    # not the user's: every run compiles what it tests, and leaves nothing behind
    if "PERFSIM_CACHE_DIR" not in os.environ:
        _KERNEL_CACHE.append(tempfile.mkdtemp(prefix="perfsim-test-kernels-"))
        os.environ["PERFSIM_CACHE_DIR"] = _KERNEL_CACHE[0]


def pytest_unconfigure(config):
    for folder in _KERNEL_CACHE:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)      # before -m deselects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        if str(item.path).endswith(".ipynb"):
            item.add_marker(pytest.mark.notebooks)
