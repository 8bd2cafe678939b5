"""The GPU side of ``perfsim validate``: check for a GPU, describe it, and measure rows.

:func:`make_measure` returns the ``measure(row) -> record`` function that
:func:`perfsim.validate.runner.run` calls. Failures become records, never crashes: out of memory
(``oom``, after which the CUDA cache is emptied), kernels or backends that refuse a shape
(``unsupported``), wrong results (``incorrect``, not timed) and anything else (``error``); an
error that leaves the CUDA context unusable also stops the run (resume in a fresh process).
"""

from __future__ import annotations

import gc

from perfsim.gpu import GPUSpec
from perfsim.validate import compiled
from perfsim.validate.measure import (
    FATAL_CUDA,
    Unsupported,
    check,
    make_inputs,
    own_impl,
    timed_fields,
)
from perfsim.validate.models import (
    EXTERNAL_MODELS,
    planned_prediction,
    predict_external,
    predict_own,
)
from perfsim.validate.runner import Row


def no_gpu_reason() -> str | None:
    """Why nothing can be timed here (None if a CUDA GPU is usable)."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    except Exception as exc:  # noqa: BLE001 (a broken CUDA install: OSError on a missing .so)
        text = " ".join(str(exc).split())
        return f"torch failed to import: {type(exc).__name__}: {text[:200]}"
    try:
        usable = torch.cuda.is_available()
    except Exception as exc:  # noqa: BLE001
        return f"torch.cuda.is_available() failed: {type(exc).__name__}: {exc}"
    if not usable:
        return "torch.cuda.is_available() is False"
    return None


def device_info() -> dict:
    """Device and software versions, as strings (for records and calibrated profiles)."""
    import subprocess

    import torch

    props = torch.cuda.get_device_properties(0)
    info = {"device": torch.cuda.get_device_name(0),
            "compute_capability": f"{props.major}.{props.minor}",
            "sm_count": str(props.multi_processor_count),
            "torch": torch.__version__, "cuda": str(torch.version.cuda)}
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = "not installed"
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True)
        info["driver"] = out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        info["driver"] = "unknown (nvidia-smi failed)"
    return info


def _first_line(exc: BaseException, limit: int = 400) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"[:limit]


def make_measure(gpu: GPUSpec, seed: int = 0):
    """``measure(row) -> record`` on the current CUDA device, predicting with ``gpu``."""
    import torch

    tracker = compiled.Tracker()
    device = torch.cuda.get_device_name(0)

    def measure(row: Row) -> dict:
        rec = {"gpu_profile": gpu.id, "device": device,
               "model_name": row.algorithm if row.kind == "own" else
               EXTERNAL_MODELS[row.algorithm][0]}
        try:
            rec.update(_measure(row, gpu, tracker, seed))
        except torch.cuda.OutOfMemoryError as exc:
            rec.update(status="oom", reason=_first_line(exc))
        except Unsupported as exc:
            rec.update(status="unsupported", reason=str(exc))
        except Exception as exc:  # noqa: BLE001 - every failure is recorded
            if type(exc).__name__ == "OutOfResources":  # triton: shared memory / registers
                rec.update(status="unsupported", reason=_first_line(exc))
            else:
                rec.update(status="error", reason=_first_line(exc))
                if any(marker in str(exc) for marker in FATAL_CUDA):
                    rec["abort_run"] = "the CUDA context is unusable after: " + rec["reason"]
        if rec["status"] == "oom":
            gc.collect()
            torch.cuda.empty_cache()
        if "predicted_s" not in rec:
            rec = {**planned_prediction(row.shape, row.algorithm, row.kind, gpu), **rec}
        return rec

    return measure


def _measure(row: Row, gpu: GPUSpec, tracker: compiled.Tracker, seed: int) -> dict:
    import torch

    from perfsim.validate import backends

    q, k, v = make_inputs(row, seed)
    impl = own_impl(row, q, k, v) if row.kind == "own" else backends.impl(row, q, k, v)
    do = torch.randn_like(q) if row.shape.phase == "bwd" else None
    before = compiled.snapshot(impl.module)
    with impl.context():
        rec = check(row, impl, q, k, v, do)
        rec["launch_config"] = impl.launch_config
        if row.kind == "own":
            info = tracker.observe(row.algorithm, impl.launch_config, before,
                                   compiled.snapshot(impl.module), row.shape.head_dim)
            family = compiled.tensor_family(info)
            pred = predict_own(row.shape, row.algorithm, gpu, impl.launch_config, family)
            rec.update(compiled=info, tensor_family_source="ptx" if family else "rule")
        else:
            pred = predict_external(row.shape, row.algorithm, gpu)
            rec["tensor_family_source"] = "model default"
        rec.update(pred)
        if rec.get("status") == "incorrect":
            return rec
        rec.update(timed_fields(row, impl, q, k, v, do, pred))
    return rec
