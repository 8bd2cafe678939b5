"""Which perfsim model configuration each measured kernel is compared with — in one place.

* Own kernels (``validate/kernels``): :func:`kernel_config_to_algorithm` turns the launch
  configuration a kernel reports (``launch_config(...)``) into the matching algorithm config,
  through :data:`MAPPERS` (one function per algorithm; extend it as models are added).
* Kernels users call (PyTorch SDPA backends, FlexAttention): :data:`EXTERNAL_MODELS` names the
  model each is compared with, and :func:`external_algorithm` builds it.

Pure Python; no torch.
"""

from __future__ import annotations

from collections.abc import Callable

from perfsim import algorithms
from perfsim.errors import InfeasibleError, PerfsimError
from perfsim.gpu import GPUSpec
from perfsim.implementations import FLEX_DIVISIBLE_MULTIPLE
from perfsim.predict import predict
from perfsim.workload import AttentionWorkload

#: The project's own kernels, in the order the papers introduced them.
OWN_ALGORITHMS = ("standard", "fa1", "fa2", "fa3", "fa4")

#: External backend -> (model name, what the backend is). SDPA's FLASH_ATTENTION backend is
#: flash-attn 2's CUDA code (mma.sync); CUDNN_ATTENTION on Hopper is cuDNN's FA3-style
#: warp-specialised kernel; EFFICIENT_ATTENTION is the xFormers/CUTLASS memory-efficient
#: kernel (FA2-like tiling); FlexAttention is a Triton template with FA2's loop order.
EXTERNAL_MODELS = {
    "sdpa_flash": ("fa2", "torch SDPA, SDPBackend.FLASH_ATTENTION"),
    "sdpa_cudnn": ("fa3", "torch SDPA, SDPBackend.CUDNN_ATTENTION"),
    "sdpa_efficient": ("fa2", "torch SDPA, SDPBackend.EFFICIENT_ATTENTION"),
    "flex": ("fa2", "torch.compile(flex_attention)"),
}

#: FlexAttention's default forward tiles on sm_90, bf16, by head dim: (BLOCK_M, BLOCK_N, warps),
#: from torch/_inductor/kernel/flex_attention.py ``_h100_default_config`` (torch 2.5-2.7). Newer
#: torch releases choose through template heuristics that may differ: an approximation.
FLEX_TILES = {64: (128, 128, 4), 128: (128, 64, 8)}
FLEX_DEFAULT_TILE = (128, 64, 4)


def triton_tensor_family(gpu: GPUSpec, block_m: int, num_warps: int) -> str:
    """The MMA instructions Triton emits for a ``tl.dot`` with this tile on ``gpu``.

    Triton uses WGMMA (its MMAv3) on sm_90 when the CTA has whole warpgroups
    (``num_warps % 4 == 0``) and the tile's M is a multiple of 64, else ``mma.sync`` (MMAv2)
    (triton lib/Dialect/TritonGPU/Transforms/AccelerateMatmul.cpp, ``supportMMA``).
    ``perfsim validate`` replaces this rule by what the compiled PTX shows when it can read it.
    """
    if gpu.features.wgmma and num_warps % 4 == 0 and block_m % 64 == 0:
        return "wgmma"
    return "mma_sync"


def _family(gpu, cfg, family):
    return family or triton_tensor_family(gpu, cfg["block_m"], cfg["num_warps"])


def _standard(cfg: dict, gpu: GPUSpec, family: str | None):
    # the eager kernel masks with out-of-place Tensor.masked_fill (copy + fill)
    return algorithms.Standard(softmax=cfg.get("softmax", "fused"), mask_op="masked_fill")


def _fa1(cfg: dict, gpu: GPUSpec, family: str | None):
    # grid (B*H,): one CTA per (batch, head), no query split; fully masked tiles are skipped.
    # O, l and m make their round trips in fp32 workspaces (launch_config o_workspace_dtype).
    # Unpipelined: every inner step waits for its loads; Triton's num_stages 2 and 3 did not
    # change the step time on the H200 (validate/reports/h200/probes/clocks-fa1.json).
    o_bytes = 4 if cfg.get("o_workspace_dtype") == "fp32" else None
    return algorithms.FA1(block_r=cfg["block_m"], block_c=cfg["block_n"], pipelined=False,
                          warps=cfg["num_warps"], q_splits=1, skip_masked_tiles=True,
                          o_workspace_bytes=o_bytes, tensor_family=_family(gpu, cfg, family))


def _fa2(cfg: dict, gpu: GPUSpec, family: str | None):
    tiles = {"block_m": cfg["block_m"], "block_n": cfg["block_n"], "warps": cfg["num_warps"]}
    if cfg.get("phase") == "bwd":
        tiles = {f"bwd_{k}": v for k, v in tiles.items()}
    # Triton code, not flash-attn 2's: none of flash-attn 2's censuses (bound checks, mask)
    return algorithms.FA2(**tiles, tensor_family=_family(gpu, cfg, family),
                          bound_checks="none")


def _fa3(cfg: dict, gpu: GPUSpec, family: str | None):
    # The Triton FA3-style kernel loads through TMA descriptors and pipelines K/V over
    # num_stages; Triton 3.6 has no ping-pong between consumer warpgroups and no
    # intra-warpgroup GEMM/softmax overlap, and its warp_specialize makes partitions on
    # Blackwell only (validate/kernels/README.md, "What Triton 3.6 can and cannot express").
    specialized = bool(cfg.get("warp_specialize", False)) and gpu.features.tcgen05
    return algorithms.FA3(block_m=cfg["block_m"], block_n=cfg["block_n"],
                          stages=cfg["num_stages"], pingpong=False,
                          intra_warpgroup_overlap=False, warp_specialized=specialized,
                          persistent=False, tensor_family=_family(gpu, cfg, family))


def _fa4(cfg: dict, gpu: GPUSpec, family: str | None):
    # The Triton FA4-style kernel runs FA2's loop with FA4's softmax knobs; on a GPU without
    # tcgen05 the model's Hopper path (variant sm90) is the matching one.
    return algorithms.FA4(variant="sm100" if gpu.features.tcgen05 else "sm90",
                          q_tiles_per_cta=max(1, cfg["block_m"] // 128),
                          block_n=cfg["block_n"],
                          emulate_fraction=cfg.get("emulate_fraction"),
                          rescale_threshold=cfg.get("rescale_threshold", 8.0),
                          lpt_scheduling=False,      # Triton launches query tiles in order
                          persistent=False)          # one CTA per tile


#: algorithm name -> f(launch_config, gpu, tensor_family or None) -> algorithm config.
MAPPERS: dict[str, Callable] = {"standard": _standard, "fa1": _fa1, "fa2": _fa2, "fa3": _fa3,
                                "fa4": _fa4}


def kernel_config_to_algorithm(name: str, launch_config: dict, gpu: GPUSpec,
                               tensor_family: str | None = None) -> algorithms.Algorithm:
    """The perfsim algorithm config matching what kernel ``name`` launched.

    Args:
        name: one of :data:`OWN_ALGORITHMS`.
        launch_config: the dict the kernel's ``launch_config(...)`` returned.
        gpu: the GPU the prediction is for (decides Triton's MMA family).
        tensor_family: the MMA family seen in the compiled kernel, if known (else the rule of
            :func:`triton_tensor_family`).

    Raises:
        perfsim.PerfsimError: unknown name.
        ValueError: the configuration does not fit the model's options (pydantic).
    """
    if name not in MAPPERS:
        raise PerfsimError(f"no model mapping for kernel {name!r}; known: {', '.join(MAPPERS)}")
    return MAPPERS[name](launch_config, gpu, tensor_family)


def external_algorithm(backend: str, gpu: GPUSpec, head_dim: int) -> algorithms.Algorithm:
    """The model config an external backend is compared with (:data:`EXTERNAL_MODELS`);
    ``head_dim`` picks FlexAttention's tile.

    Raises:
        perfsim.PerfsimError: unknown backend, or its model is not in perfsim.
    """
    if backend not in EXTERNAL_MODELS:
        raise PerfsimError(f"unknown backend {backend!r}; known: {', '.join(EXTERNAL_MODELS)}")
    name = EXTERNAL_MODELS[backend][0]
    if backend == "flex":
        block_m, block_n, warps = FLEX_TILES.get(head_dim, FLEX_DEFAULT_TILE)
        # Triton code, not flash-attn 2's: FlexAttention's own bound checks (as the flex
        # preset), no flash-attn 2 mask census
        return algorithms.FA2(block_m=block_m, block_n=block_n, warps=warps,
                              tensor_family=triton_tensor_family(gpu, block_m, warps),
                              bound_checks="flex",
                              bound_check_unless_multiple=FLEX_DIVISIBLE_MULTIPLE)
    return algorithms.resolve(name)


def prediction_fields(workload: AttentionWorkload, gpu: GPUSpec, algorithm) -> dict:
    """The prediction columns of a result record (seconds, bound, per-unit seconds, counts).

    A model that cannot make the prediction gives ``predicted_s = None`` and the reason in
    ``prediction_error`` instead of raising.
    """
    try:
        p = predict(workload, gpu=gpu, algorithm=algorithm)
    except (InfeasibleError, PerfsimError) as exc:
        return {"model": getattr(algorithm, "label", lambda: str(algorithm))(),
                "predicted_s": None, "prediction_error": str(exc)}
    return {"model": p.algorithm.label(), "predicted_s": p.seconds,
            "predicted_bound": p.bound, "predicted_tflops": p.tflops,
            "predicted_unit_s": {u: float(t) for u, t in p.unit_seconds.items()},
            "model_flops": float(p.model_flops), "hbm_bytes": float(p.counts.hbm_bytes),
            "prediction_error": None}


def predict_own(shape, algorithm: str, gpu: GPUSpec, cfg: dict,
                family: str | None = None) -> dict:
    """Prediction fields for own kernel ``algorithm`` from the configuration it reported."""
    try:
        algo = kernel_config_to_algorithm(algorithm, cfg, gpu, family)
    except (PerfsimError, TypeError, ValueError, KeyError, AttributeError) as exc:
        detail = f"launch_config has no {exc}" if isinstance(exc, KeyError) else str(exc)
        return {"model": algorithm, "predicted_s": None, "prediction_error": detail}
    return prediction_fields(shape.workload(), gpu, algo)


def predict_external(shape, backend: str, gpu: GPUSpec) -> dict:
    """Prediction fields for an external backend (:data:`EXTERNAL_MODELS`)."""
    try:
        algo = external_algorithm(backend, gpu, shape.head_dim)
    except PerfsimError as exc:
        return {"model": EXTERNAL_MODELS.get(backend, (backend,))[0], "predicted_s": None,
                "prediction_error": str(exc)}
    return prediction_fields(shape.workload(), gpu, algo)


def planned_prediction(shape, algorithm: str, kind: str, gpu: GPUSpec) -> dict:
    """Prediction without running anything (``--dry-run``, and rows that failed to run):
    own kernels use the pure-Python ``kernels.configs`` twin of their ``launch_config``."""
    if kind != "own":
        return predict_external(shape, algorithm, gpu)
    from perfsim.validate.kernels import configs

    try:
        cfg = getattr(configs, algorithm)(
            shape.batch, shape.heads, shape.kv_heads, shape.seqlen_q, shape.seqlen_k,
            shape.head_dim, causal=shape.causal, dtype=shape.dtype, phase=shape.phase)
    except (ValueError, TypeError, AttributeError) as exc:
        return {"model": algorithm, "predicted_s": None,
                "prediction_error": f"launch_config: {exc}"}
    return {"launch_config": cfg, **predict_own(shape, algorithm, gpu, cfg)}
