"""The layout of ``Prediction.to_dict()`` and ``perfsim predict --json`` as pydantic models,
and the JSON Schema generated from them (committed as ``docs/prediction.schema.json``;
``python -m perfsim.schema`` regenerates it)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class KernelRecord(BaseModel):
    """One launched kernel."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: str
    seconds: float = Field(description="kernel time (s)")
    bound: str = Field(description="the unit that binds it")
    grid: int = Field(description="CTAs launched")
    waves: int = Field(description="CTAs on the busiest SM")
    tensor_issue_share: float = Field(
        1.0, description="share of the tensor rate its own issue sustains "
        "(GPUSpec.wgmma_one_cta_fraction for a Triton WGMMA kernel with one CTA per SM)")
    unit_seconds: dict[str, float] = Field(description="each unit's time alone (s)")
    terms: dict[str, float] = Field(description="named counts, '<field>/<what>'")


class PredictionRecord(BaseModel):
    """One prediction (``Prediction.to_dict()``)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    schema_version: int
    workload: dict = Field(description="AttentionWorkload fields")
    algorithm: str = Field(description="algorithm label with its non-default options "
                           "(predict and --algorithm take it back, e.g. fa2(block_m=64))")
    gpu: str = Field(description="GPU id")
    seconds: float = Field(description="predicted time per call (s)")
    tflops: float = Field(description="TFLOP/s by the FlashAttention convention")
    bound: str
    model_flops: float
    clock_hz: float | None = Field(description="SM clock the times are at (Hz)")
    power_w: float | None = Field(description="modelled board power (W); null: no power table")
    executed_flops: float
    peak_tflops: float
    unit_seconds: dict[str, float]
    bound_seconds: dict[str, float] = Field(
        description="per bound (a unit, latency, launch, host) the time it set (s); host: "
        "the host floor's wait and the kernels of the phases a floor sets")
    counts: dict[str, float]
    memory_bytes: float
    fits_memory: bool
    kernels: list[KernelRecord]
    term_seconds: dict[str, float] = Field(description="each named term alone on its unit (s)")
    notes: list[str] = Field(default_factory=list, description="what the table prints under "
                             "the prediction: a kernel perfsim times in place of one it has "
                             "no model of, a footprint above the GPU's memory")
    explanation: str | None = Field(default=None, description="with --explain")
    timing: dict = Field(default_factory=dict, description="TimingParams fields that differ "
                         "from timing_for(gpu, algorithm)'s defaults (--kernel-only's zero host "
                         "floors, a --clock choice): predict(..., timing=this) repeats the "
                         "prediction")


class InfeasibleRecord(BaseModel):
    """A configuration that cannot run (``--algorithm all`` / ``presets``)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    algorithm: str
    infeasible: str


def schema() -> dict:
    """JSON Schema of what ``--json`` prints: one record (one of the two record layouts), or
    for ``--algorithm all`` / ``presets`` a list of them; the layouts' shared definitions sit
    under the root's ``$defs`` (so standard validators resolve every ``$ref``)."""
    from pydantic.json_schema import models_json_schema

    refs, top = models_json_schema([(PredictionRecord, "validation"),
                                    (InfeasibleRecord, "validation")])
    record = [refs[(PredictionRecord, "validation")], refs[(InfeasibleRecord, "validation")]]
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "perfsim prediction", "$defs": top["$defs"],
            "oneOf": [*record, {"type": "array", "items": {"oneOf": record}}]}


SCHEMA_FILE = Path(__file__).resolve().parent.parent / "docs" / "prediction.schema.json"


def main(argv=None) -> int:
    """Write the schema to ``argv[0]`` (default ``docs/prediction.schema.json``)."""
    argv = sys.argv[1:] if argv is None else argv
    path = Path(argv[0]) if argv else SCHEMA_FILE
    path.write_text(json.dumps(schema(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
