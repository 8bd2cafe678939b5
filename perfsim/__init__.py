"""perfsim: an analytical performance simulator for attention kernels on GPUs.

    import perfsim
    w = perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=4096, head_dim=128,
                                  causal=True, dtype="bf16", phase="fwd")
    p = perfsim.predict(w, gpu="h100-sxm5", algorithm="fa2")
    print(p.seconds, p.tflops, p.bound); print(p.explain())
"""

from perfsim import algorithms
from perfsim.errors import InfeasibleError, PerfsimError
from perfsim.gpu import GPUSpec
from perfsim.gpu_catalog import gpus, load_gpu
from perfsim.predict import predict
from perfsim.prediction import Counts, Prediction
from perfsim.sweep import sweep
from perfsim.timing import TimingParams
from perfsim.workload import AttentionWorkload

__version__ = "0.1.0"


__all__ = [
    "AttentionWorkload", "Counts", "GPUSpec", "InfeasibleError", "PerfsimError", "Prediction",
    "TimingParams", "algorithms", "gpus", "load_gpu", "predict", "sweep",
]
