"""Software profiles: what the framework around the attention kernels adds to their GPU time.

An attention call from PyTorch is more than its kernels' GPU time:

* each kernel launch leaves a gap on the GPU (``launch_overhead_s``);
* the host needs some time per call to dispatch it (Python, the dispatcher, autograd for the
  backward); when the GPU work is shorter than that, calls issued back to back are paced by
  the host, so a call takes ``max(GPU time, host floor)`` — per phase (``host_floor_*_s``;
  a forward without any mask may have its own, ``host_floor_fwd_unmasked_s``, and a forward
  through a paged K/V cache adds ``host_floor_fwd_paged_extra_s``);
* PyTorch's own elementwise kernels (the eager path) reach only a fraction of the HBM copy
  bandwidth: ``torch.softmax`` by row length, ``masked_fill_`` with a broadcast mask.

These are facts about the software, measured on one GPU and stated as fractions or times with
their sources in ``hardware/software/*.toml``; they apply to every GPU (an assumption named
in each source string). The eager ceilings are rates of the SMs, not of the memory (the H100
and the H200, equal SMs and clock, ran them at the same bytes per second): a profile that names
the GPU they were measured on (``eager_reference_*``) has them carried to another GPU by SM
count x clock (``perfsim.timing.eager_sm_scale``). ``perfsim.timing.TimingParams.for_gpu``
reads the default profile.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from perfsim.errors import PerfsimError

#: The profile plain algorithm names and the PyTorch-based implementations use.
DEFAULT_SOFTWARE = "pytorch"


class SoftwareProfile(BaseModel):
    """Per-call and per-kernel costs of a software stack (units in the field names).

    Raises:
        perfsim.PerfsimError: from :func:`load_software` on a missing or invalid profile.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    id: str
    name: str
    launch_overhead_s: float = Field(ge=0, le=1e-3, description="GPU-side gap per launched "
                                     "kernel (s)")
    host_floor_fwd_s: float = Field(ge=0, le=1.0, description="host time per forward call; "
                                    "a call takes at least this long (s)")
    host_floor_bwd_s: float = Field(ge=0, le=1.0, description="host time per backward call "
                                    "(autograd included) (s)")
    host_floor_fwd_unmasked_s: float | None = Field(
        default=None, ge=0, le=1.0, description="host time per forward call of attention "
        "with no mask (no causal mask, no window), where the call path does more host work "
        "than with one (FlexAttention without a BlockMask builds an empty one in every call) "
        "(s); None: host_floor_fwd_s")
    host_floor_fwd_paged_extra_s: float = Field(
        default=0.0, ge=0, le=1.0, description="host time a forward call with a paged K/V "
        "cache (a page table passed) adds to its forward floor (s)")
    eager_softmax: dict[int, float] = Field(
        default_factory=dict, description="row length -> fraction of the HBM copy bandwidth "
        "torch.softmax reaches (interpolated in log2 of the row length)")
    eager_softmax_masked: dict[int, float] = Field(
        default_factory=dict, description="row length -> torch.softmax's rate on causally "
        "masked scores (the upper triangle -inf) over its rate on unmasked ones (interpolated "
        "in log2 of the row length; empty = 1)")
    eager_broadcast_fill: float = Field(default=1.0, ge=0.01, le=1, description="fraction of "
                                        "the HBM copy bandwidth masked_fill_ with a "
                                        "broadcast mask reaches")
    eager_reference_copy_bytes_per_s: float | None = Field(
        default=None, gt=0, le=1e15, description="the HBM copy bandwidth (B/s) the "
        "eager_softmax, eager_broadcast_fill and strided_copy fractions were measured "
        "against; with the two "
        "fields below it marks those ceilings as SM-side rates that carry to other GPUs by "
        "SM count x clock, not by bandwidth (perfsim.timing.eager_sm_scale); None: fractions "
        "of every GPU's own copy bandwidth")
    eager_reference_sm_count: int | None = Field(
        default=None, gt=0, le=4096, description="SMs of the GPU the ceilings were measured on")
    eager_reference_clock_hz: float | None = Field(
        default=None, ge=1e8, le=5e9, description="SM clock (Hz) the ceilings were measured at")
    strided_copy: float = Field(default=1.0, ge=0.01, le=1, description="fraction of the HBM "
                                "copy bandwidth PyTorch's strided (non-vectorised) elementwise "
                                "copy reaches (of the reference GPU's when eager_reference_* "
                                "are set)")
    sgemm_peak_fraction: float = Field(
        default=1.0, ge=0.01, le=1, description="share of the FP32 pipes' peak cuBLAS's SIMT "
        "SGEMM main loop sustains (its FFMA share of issue slots): e_inf of the K law "
        "e(K) = e_inf · K / (K + k0) (validate/probe_sgemm.py)")
    sgemm_tile_overhead_k: float = Field(
        default=0.0, ge=0, le=4096, description="k0 of the same law: each output tile's "
        "prologue and epilogue cost as many K-steps of its main loop")
    sgemm_width: dict[int, float] = Field(
        default_factory=dict, description="output width N -> share of the wide-output SGEMM "
        "rate cuBLAS's SIMT SGEMM sustains (it launches narrower tiles for narrow outputs; "
        "interpolated linearly, 1 past the table)")
    bwd_layout_copies: int = Field(default=0, ge=0, le=8, description="tensors of "
                                   "B x H x N_q x d_v elements the backward copies into "
                                   "another layout (strided copies)")
    base: str | None = Field(default=None, description="profile whose values this one "
                             "starts from")
    sources: dict[str, str] = Field(default_factory=dict)

    @field_validator("launch_overhead_s", "host_floor_fwd_s", "host_floor_bwd_s",
                     "host_floor_fwd_unmasked_s", "host_floor_fwd_paged_extra_s",
                     mode="before")
    @classmethod
    def _seconds(cls, value, info):
        """A time in seconds: a real number (not a bool or a string)."""
        if value is None and info.field_name == "host_floor_fwd_unmasked_s":
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{info.field_name} must be a number of seconds, got {value!r}")
        return value

    @field_validator("eager_softmax", "eager_softmax_masked", "sgemm_width")
    @classmethod
    def _fractions(cls, table, info):
        for length, fraction in table.items():
            if length < 1 or not 0.01 <= fraction <= 1:
                raise ValueError(f"{info.field_name}[{length}] = {fraction}: keys must be "
                                 "positive and fractions in [0.01, 1]")
        return table

    @model_validator(mode="after")
    def _reference_whole(self):
        """The eager ceilings' reference GPU is given whole (copy bandwidth, SMs, clock) or
        not at all."""
        given = [self.eager_reference_copy_bytes_per_s is not None,
                 self.eager_reference_sm_count is not None,
                 self.eager_reference_clock_hz is not None]
        if any(given) and not all(given):
            raise ValueError("eager_reference_copy_bytes_per_s, eager_reference_sm_count and "
                             "eager_reference_clock_hz go together: give all three or none")
        return self

    def table(self, name: str) -> tuple[tuple[float, float], ...]:
        """``((key, fraction), ...)`` of the table field ``name``, sorted by key."""
        return tuple(sorted((float(k), float(v)) for k, v in getattr(self, name).items()))




#: Per algorithm class, whether its configs have a ``software`` profile (a field or a class
#: attribute: a class's fields never change, and configs take no extra attributes).
_HAS_SOFTWARE: dict[type, bool] = {}


def software_of(algo) -> str:
    """The software profile an algorithm config runs under (``perfsim.timing_for``'s
    default): its ``software`` field, else :data:`DEFAULT_SOFTWARE`. ``getattr`` with a
    default, without the exception a pydantic model raises for a missing attribute on every
    call (which classes have it is kept)."""
    has = _HAS_SOFTWARE.get(type(algo))
    if has is None:
        has = _HAS_SOFTWARE[type(algo)] = hasattr(algo, "software")
    return algo.software if has else DEFAULT_SOFTWARE


def _software_dir():
    return resources.files("perfsim.catalog") / "software"


def software_profiles() -> list[str]:
    """Ids of the software profiles (``hardware/software/*.toml``)."""
    return sorted(p.name[:-5] for p in _software_dir().iterdir() if p.name.endswith(".toml"))


@lru_cache(maxsize=16)
def load_software(profile: str = DEFAULT_SOFTWARE) -> SoftwareProfile:
    """Load a software profile by id.

    Raises:
        perfsim.PerfsimError: unknown id (the message lists the known ones) or an invalid file.
    """
    path = _software_dir() / f"{profile}.toml"
    if not path.is_file():
        raise PerfsimError(f"unknown software profile {profile!r}; known: "
                           f"{', '.join(software_profiles())}")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        if data.get("base"):
            base = load_software(data["base"]).model_dump()
            if "host_floor_fwd_s" in data and "host_floor_fwd_unmasked_s" not in data:
                # a profile that sets its own forward floor sets it for every forward
                base["host_floor_fwd_unmasked_s"] = None
            if "host_floor_fwd_s" in data and "host_floor_fwd_paged_extra_s" not in data:
                base["host_floor_fwd_paged_extra_s"] = 0.0
            sources = {**base["sources"], **data.get("sources", {})}
            data = {**base, **data, "sources": sources}
        for table in ("eager_softmax", "eager_softmax_masked", "sgemm_width"):
            data[table] = {int(k): v for k, v in data.get(table, {}).items()}
        return SoftwareProfile.model_validate(data)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, ValueError) as exc:
        first = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        raise PerfsimError(f"software profile {profile!r}: {first}") from None
