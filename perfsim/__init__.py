"""perfsim: an analytical performance simulator for attention kernels on GPUs.

    import perfsim
    w = perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=4096, head_dim=128,
                                  causal=True, dtype="bf16", phase="fwd")
    p = perfsim.predict(w, gpu="h100-sxm5", algorithm="fa2")
    print(p.seconds, p.tflops, p.bound); print(p.explain())

The public names load on first use (PEP 562 ``__getattr__``), so ``import perfsim`` and a
command such as ``perfsim gpus`` do not pay for the algorithms they do not touch.
"""

from __future__ import annotations

import importlib
import sys
import types

from perfsim.errors import InfeasibleError, PerfsimError

__version__ = "0.1.0"

#: public name -> the module that defines it
_LAZY = {
    "AttentionWorkload": "perfsim.workload", "Counts": "perfsim.prediction",
    "GPUSpec": "perfsim.gpu", "Prediction": "perfsim.prediction",
    "TimingParams": "perfsim.timing", "gpus": "perfsim.gpu_catalog",
    "load_gpu": "perfsim.gpu_catalog", "predict": "perfsim.predict", "sweep": "perfsim.sweep",
    "sweep_frames": "perfsim.sweep", "predict_rows": "perfsim.rows",
    "timing_for": "perfsim.predict",
}


def __getattr__(name: str):
    if name == "algorithms":
        return importlib.import_module("perfsim.algorithms")
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value          # later lookups skip this function
        return value
    raise AttributeError(f"module 'perfsim' has no attribute {name!r}")


class _Package(types.ModuleType):
    """The package module: importing the submodules ``perfsim.predict`` and ``perfsim.sweep``
    makes the import system bind them to the package attributes of the same name, where the
    public names are the functions; those two keep the functions (as the eager imports did)."""

    def __setattr__(self, name, value):
        if name in ("predict", "sweep") and isinstance(value, types.ModuleType):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY, "algorithms"])


__all__ = [
    "AttentionWorkload", "Counts", "GPUSpec", "InfeasibleError", "PerfsimError", "Prediction",
    "TimingParams", "algorithms", "gpus", "load_gpu", "predict", "predict_rows", "sweep",
    "timing_for",
]
