"""Recompute the predictions of measured rows with the current model (no GPU needed).

A run's ``results.jsonl`` keeps each measurement with the launch configuration and the MMA
family the kernel was compiled to, so a later version of perfsim can be scored against the
same measurements: ``perfsim validate --report-only DIR --repredict``. The measurements never
change; the report says which model version made the predictions.
"""

from __future__ import annotations

from perfsim.errors import PerfsimError
from perfsim.gpu import GPUSpec
from perfsim.validate import compiled
from perfsim.validate.models import (
    EXTERNAL_MODELS,
    kernel_config_to_algorithm,
    predict_external,
    prediction_fields,
)
from perfsim.validate.shapes import Shape

SHAPE_FIELDS = ("batch", "heads", "seqlen_q", "head_dim", "causal", "kv_heads", "seqlen_k",
                "dtype", "phase", "dropout_p")
#: A row's prediction fields, cleared where it cannot be re-predicted but is kept.
STALE = ("predicted_s", "predicted_bound", "predicted_tflops", "predicted_unit_s", "error",
         "achieved_gbps")


def repredict(records: list[dict], gpu: GPUSpec, problems: list[str] | None = None,
              lines: dict[str, int] | None = None) -> list[dict]:
    """New records whose prediction fields (and ``error``) come from the current model.

    Rows without a launch configuration that were never measured (own kernels that never
    ran, rows whose time was damaged) are kept with their prediction fields cleared (they are
    not compared; the stored prediction is another model's). A row that cannot be
    re-predicted — a shape perfsim refuses
    (``dtype "int4"``, a size beyond 2**45), a measured row whose launch configuration is
    missing or damaged, or one the model mapping cannot read, an unknown external
    backend — is left out and one line saying why is appended to ``problems`` (``lines``:
    key -> line number of results.jsonl, for that line).

    Raises:
        perfsim.PerfsimError: such a row when ``problems`` is None.
    """
    out = []
    for rec in records:
        try:
            out.append(_repredict_one(rec, gpu))
        except PerfsimError as exc:
            key = rec.get("key")
            where = f"line {lines[key]} ({key!r})" if lines and key in lines else repr(key)
            text = f"{where}: cannot be re-predicted: {exc}; skipped"
            if problems is None:
                raise PerfsimError(text) from None
            problems.append(text)
    return out


def _repredict_one(rec: dict, gpu: GPUSpec) -> dict:
    try:
        shape = Shape(**{f: rec[f] for f in SHAPE_FIELDS if rec.get(f) is not None})
        workload = shape.workload()
    except (TypeError, ValueError) as exc:      # PerfsimError is a ValueError
        raise PerfsimError(f"shape: {exc}") from None
    if rec.get("kind", "own") == "own":
        cfg = rec.get("launch_config")
        if not cfg:
            if rec.get("status") == "ok" or rec.get("measured_s") is not None:
                # a measured row whose configuration is missing or damaged (set to null by
                # report.check_records): its stored prediction came from the model that ran it
                raise PerfsimError("its launch_config is missing or damaged, so the kernel's "
                                   "configuration is unknown and its stored prediction "
                                   "(another model's) cannot be re-made")
            # never ran, or its time was damaged (status 'invalid'): kept, listed with its
            # status, without the stored prediction of the model that ran it
            return {**rec, **dict.fromkeys(STALE), "gpu_profile": gpu.id,
                    "prediction_error": "not re-predicted: no launch_config"}
        info = rec.get("compiled")
        family = compiled.tensor_family(info if isinstance(info, dict) else {})
        try:
            algo = kernel_config_to_algorithm(rec["algorithm"], cfg, gpu, family)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            detail = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
            raise PerfsimError(f"launch_config {cfg!r:.60} does not map to a model "
                               f"({detail})") from None
        pred = prediction_fields(workload, gpu, algo)
    else:
        if rec["algorithm"] not in EXTERNAL_MODELS:
            raise PerfsimError(f"unknown external backend {rec['algorithm']!r}; known: "
                               f"{', '.join(EXTERNAL_MODELS)}")
        pred = predict_external(shape, rec["algorithm"], gpu)
    new = {**rec, **pred, "gpu_profile": gpu.id}
    measured = rec.get("measured_s")
    new["error"] = ((pred["predicted_s"] - measured) / measured
                    if measured and pred.get("predicted_s") else None)
    if pred.get("hbm_bytes") and measured:
        new["achieved_gbps"] = pred["hbm_bytes"] / measured / 1e9
    return new
