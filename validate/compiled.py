"""What the compiler made of an own kernel: MMA family, registers, spills, shared memory.

Read from Triton's in-memory cache of compiled kernels (``JITFunction.device_caches``, Triton
3.x): the kernels compiled during a row's correctness run are those whose cache keys are new.
Rows that reuse an already compiled variant get the facts remembered for the same launch
configuration. Best effort: any failure leaves the facts empty and the model falls back to
:func:`perfsim.validate.models.triton_tensor_family`.
"""

from __future__ import annotations

#: PTX mnemonics of the tensor-core instruction families perfsim models.
PTX_FAMILIES = {"wgmma": "wgmma.mma_async", "mma_sync": "mma.sync"}


def snapshot(module) -> dict:
    """Compiled kernels of ``module``'s ``@triton.jit`` functions: ``{(fn, key): kernel}``."""
    out = {}
    try:
        from triton.runtime.jit import JITFunction
    except ImportError:
        return out
    if module is None:
        return out
    for name, fn in vars(module).items():
        if not isinstance(fn, JITFunction):
            continue
        for entry in list(getattr(fn, "device_caches", {}).values()):
            for key, kernel in list(entry[0].items()):
                out[(name, str(key))] = kernel
    return out


def facts(kernels) -> dict:
    """MMA families in the PTX and resource use of compiled kernels (largest over them)."""
    families, info = set(), {}
    for kernel in kernels:
        try:
            ptx = kernel.asm["ptx"]
            families |= {fam for fam, op in PTX_FAMILIES.items() if op in ptx}
            md = kernel.metadata
            kernel._init_handles()
            for key, value in (("registers", kernel.n_regs), ("spills", kernel.n_spills),
                               ("shared_bytes", md.shared), ("num_warps", md.num_warps),
                               ("num_stages", md.num_stages)):
                info[key] = max(info.get(key, 0), int(value))
            info.setdefault("kernels", []).append(md.name)
        except Exception:  # noqa: BLE001, S112 - best effort
            continue
    if families:
        info["ptx_mma"] = sorted(families)
    return info


def tensor_family(info: dict) -> str | None:
    """The single MMA family the PTX shows, or None (none seen, or both)."""
    fams = info.get("ptx_mma", [])
    # a damaged record (a number, a string) names no family
    return fams[0] if isinstance(fams, list) and len(fams) == 1 else None


class Tracker:
    """Remembers compiled-kernel facts per launch configuration across rows."""

    def __init__(self):
        self.by_config: dict[str, dict] = {}

    @staticmethod
    def config_key(algorithm: str, cfg: dict) -> str:
        keep = ("phase", "causal", "dtype", "block_m", "block_n", "num_warps", "num_stages")
        return algorithm + "|" + "|".join(str(cfg.get(k)) for k in keep)

    def observe(self, algorithm: str, cfg: dict, before: dict, after: dict,
                head_dim: int) -> dict:
        """Facts for this configuration: from the kernels new in ``after``, else remembered."""
        key = f"{self.config_key(algorithm, cfg)}|d{head_dim}"
        new = [k for name, k in after.items() if name not in before]
        if new:
            self.by_config[key] = facts(new)
        return self.by_config.get(key, {})
