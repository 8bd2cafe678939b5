"""Recompute the predictions of measured rows with the current model (no GPU needed).

A run's ``results.jsonl`` keeps each measurement with the launch configuration and the MMA
family the kernel was compiled to, so a later version of perfsim can be scored against the
same measurements: ``perfsim validate --report-only DIR --repredict``. The measurements never
change; the report says which model version made the predictions.
"""

from __future__ import annotations

from perfsim.gpu import GPUSpec
from perfsim.validate import compiled
from perfsim.validate.models import predict_external, predict_own
from perfsim.validate.shapes import Shape

SHAPE_FIELDS = ("batch", "heads", "seqlen_q", "head_dim", "causal", "kv_heads", "seqlen_k",
                "dtype", "phase")


def repredict(records: list[dict], gpu: GPUSpec) -> list[dict]:
    """New records whose prediction fields (and ``error``) come from the current model.

    Rows without a launch configuration (own kernels that never ran) keep their fields.
    """
    out = []
    for rec in records:
        shape = Shape(**{f: rec[f] for f in SHAPE_FIELDS if rec.get(f) is not None})
        if rec.get("kind") == "own":
            cfg = rec.get("launch_config")
            if not cfg:
                out.append(rec)
                continue
            family = compiled.tensor_family(rec.get("compiled") or {})
            pred = predict_own(shape, rec["algorithm"], gpu, cfg, family)
        else:
            pred = predict_external(shape, rec["algorithm"], gpu)
        new = {**rec, **pred, "gpu_profile": gpu.id}
        measured = rec.get("measured_s")
        new["error"] = ((pred["predicted_s"] - measured) / measured
                        if measured and pred.get("predicted_s") else None)
        if pred.get("hbm_bytes") and measured:
            new["achieved_gbps"] = pred["hbm_bytes"] / measured / 1e9
        out.append(new)
    return out
