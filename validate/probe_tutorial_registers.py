"""Registers and spills of the Triton tutorial's attention kernels, from the compiler.

``python -m perfsim.validate.probe_tutorial_registers OUT.json [64,128,256]`` runs the
tutorial's forward (causal and not) and, up to head dim 128, its backward once per head dim
(bf16, B=1, H=4, N=1024) on a CUDA GPU and records, for every compiled kernel, Triton's
``n_regs``, ``n_spills``, shared memory, warps and pipeline stages, the tile constexprs
(``BLOCK_M``, ``BLOCK_N``, ``STAGE``) where Triton exposes them, whether its PTX uses
``wgmma`` or ``mma.sync``, and the CTAs per SM the driver's occupancy calculator gives it; the
file also holds the device's shared memory per SM, per CTA and reserved per CTA. The
forward's autotuner compiles every configuration of ``external.TUTORIAL_CONFIGS``, so each
one's shared memory and occupancy are read from the compiler and the driver, not inferred.
The first question it answered (for the model, not from timings): does the backward at head
dim 128 spill registers, as its dK/dV accumulators of 128 x 128 fp32 each (256 registers per
thread in a 4-warp CTA) suggest?
"""

from __future__ import annotations

import json
import sys


def _constants(compiled) -> dict:
    """The kernel's constexpr arguments by name (BLOCK_M, BLOCK_N, HEAD_DIM, STAGE), where
    Triton's compiled object exposes them; empty otherwise."""
    src = getattr(compiled, "src", None)
    consts = getattr(src, "constants", None) or {}
    names = getattr(getattr(src, "fn", None), "arg_names", None) or []
    out = {}
    for key, value in dict(consts).items():
        index = key[0] if isinstance(key, tuple) and len(key) == 1 else key
        name = names[index] if isinstance(index, int) and index < len(names) else str(index)
        if isinstance(value, (int, float, bool, str)):
            out[name] = value
    return out


def _libcuda():
    """The CUDA driver library (ctypes), or None where it cannot be loaded."""
    import ctypes

    for name in ("libcuda.so.1", "libcuda.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def _occupancy(compiled, threads: int, shared) -> int | None:
    """CTAs of this compiled kernel one SM holds, from the driver's occupancy calculator
    (``cuOccupancyMaxActiveBlocksPerMultiprocessor`` with its block size and its dynamic
    shared memory): the registers, shared memory and per-CTA reservations as the hardware
    counts them. None where the handle or the driver is not reachable."""
    import ctypes

    cuda = _libcuda()
    handle = getattr(compiled, "function", None)
    if cuda is None or not handle or shared is None:
        return None
    blocks = ctypes.c_int(0)
    err = cuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(
        ctypes.byref(blocks), ctypes.c_void_p(handle), ctypes.c_int(threads),
        ctypes.c_size_t(int(shared)))
    return blocks.value if err == 0 else None


def _device_smem() -> dict:
    """Shared-memory attributes of device 0 from the driver (bytes): per SM, the largest a CTA
    may opt in to, and what the driver reserves per CTA."""
    import ctypes

    cuda = _libcuda()
    if cuda is None:
        return {}
    cuda.cuInit(0)
    device = ctypes.c_int(0)
    cuda.cuDeviceGet(ctypes.byref(device), 0)
    out = {}
    # CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR (81), _PER_BLOCK_OPTIN (97),
    # CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK (111)
    for name, attr in (("smem_per_sm", 81), ("smem_per_block_optin", 97),
                       ("reserved_smem_per_block", 111)):
        value = ctypes.c_int(-1)
        if cuda.cuDeviceGetAttribute(ctypes.byref(value), attr, device) == 0:
            out[name] = value.value
    return out


def _kernels(fn) -> list[dict]:
    out = []
    cache = getattr(fn, "device_caches", None) or {}
    for entry in cache.values():
        table = entry[0] if isinstance(entry, tuple) else entry
        for compiled in getattr(table, "values", lambda: [])():
            asm = getattr(compiled, "asm", {}) or {}
            ptx = asm.get("ptx", "") if isinstance(asm, dict) else ""
            meta = getattr(compiled, "metadata", None)
            consts = _constants(compiled)
            out.append({"n_regs": getattr(compiled, "n_regs", None),
                        "n_spills": getattr(compiled, "n_spills", None),
                        "shared": getattr(meta, "shared", None),
                        "num_warps": getattr(meta, "num_warps", None),
                        "num_stages": getattr(meta, "num_stages", None),
                        **{k: consts[k] for k in ("BLOCK_M", "BLOCK_N", "HEAD_DIM", "STAGE")
                           if k in consts},
                        "wgmma": ptx.count("wgmma.mma_async"),
                        "mma_sync": ptx.count("mma.sync"),
                        "ctas_per_sm": _occupancy(
                            compiled, 32 * (getattr(meta, "num_warps", 0) or 0),
                            getattr(meta, "shared", None))})
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out_path = argv[0] if argv else "probe_tutorial_registers.json"
    head_dims = tuple(int(x) for x in argv[1].split(",")) if len(argv) > 1 else (64, 128)
    import torch

    from perfsim.validate.external import _tutorial_module

    mod = _tutorial_module()
    result = {"device": torch.cuda.get_device_name(), **_device_smem(), "rows": []}
    for d in head_dims:
        q, k, v = (torch.randn(1, 4, 1024, d, device="cuda", dtype=torch.bfloat16,
                               requires_grad=True) for _ in range(3))
        if d <= 128:        # the tutorial's backward runs head dims up to 128 on the H200
            o = mod.attention(q, k, v, True, d ** -0.5)
            o.backward(torch.randn_like(o))
        # the forward, causal (STAGE 3) and not (STAGE 1): the autotuner compiles every
        # configuration of external.TUTORIAL_CONFIGS that fits
        for causal in (False, True):
            mod.attention(q.detach(), k.detach(), v.detach(), causal, d ** -0.5)
        torch.cuda.synchronize()
        for name in ("_attn_bwd", "_attn_bwd_preprocess", "_attn_fwd", "_attn_fwd_tma"):
            fn = getattr(mod, name, None)
            if hasattr(fn, "configs"):          # an autotuner wraps the JIT function
                fn = fn.fn
            if fn is None:
                continue
            for rec in _kernels(fn):
                result["rows"].append({"head_dim_run": d, "kernel": name, **rec})
        for r in result["rows"]:
            print(r, flush=True)
        result["rows"] = [dict(t) for t in {tuple(sorted(r.items())) for r in result["rows"]}]
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
