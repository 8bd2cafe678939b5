"""The attention problem being timed: ``AttentionWorkload``.

Notation (used throughout perfsim; FA1 paper §2–3, FA2 §3):

==========  ============================================================================
``B``       batch size
``H``       query heads
``H_kv``    key/value heads (GQA: ``H_kv`` divides ``H``; MQA: ``H_kv = 1``)
``N_q``     query sequence length;  ``N_k``  key/value sequence length
``d``       head dimension of Q and K;  ``d_v``  head dimension of V and O
``B_r``     rows of a query tile;  ``B_c``  columns (keys) of a key/value tile
``M``       on-chip SRAM size (FA1 Algorithm 1), in elements
==========  ============================================================================

Causal masking with ``N_q != N_k`` is aligned to the bottom-right corner, as flash-attn
≥ 2.1 and PyTorch SDPA's ``causal_lower_right``: query ``i`` sees key ``j`` iff
``j <= i + (N_k - N_q)``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from perfsim.errors import PerfsimError
from perfsim.gpu import BYTES_PER_ELEMENT, Dtype

Phase = Literal["fwd", "bwd", "fwd_bwd"]
PHASES = ("fwd", "bwd", "fwd_bwd")


class AttentionWorkload(BaseModel):
    """One multi-head attention call ``O = softmax(Q Kᵀ / sqrt(d) [+ mask]) V``.

    Shapes: Q ``[B, H, N_q, d]``, K ``[B, H_kv, N_k, d]``, V ``[B, H_kv, N_k, d_v]``,
    O ``[B, H, N_q, d_v]``.

    Args:
        batch: ``B`` ≥ 1.
        heads: ``H`` ≥ 1 query heads.
        kv_heads: ``H_kv``; defaults to ``heads``; must divide ``heads`` (GQA/MQA).
        seqlen_q: ``N_q`` ≥ 1.
        seqlen_k: ``N_k`` ≥ 1; defaults to ``seqlen_q``.
        head_dim: ``d`` ≥ 1.
        head_dim_v: ``d_v``; defaults to ``head_dim``.
        causal: bottom-right aligned causal mask.
        dtype: element type of Q, K, V, O: fp32, tf32 (fp32 storage, TF32 matmuls), fp16,
            bf16, fp8_e4m3.
        phase: ``fwd``, ``bwd`` (backward alone, forward outputs given) or ``fwd_bwd``.
        dropout_p: attention dropout probability in [0, 1).

    Raises:
        perfsim.PerfsimError: one message naming the field and what is allowed.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    batch: int = Field(ge=1)
    heads: int = Field(ge=1)
    kv_heads: int | None = Field(default=None, ge=1)
    seqlen_q: int = Field(ge=1)
    seqlen_k: int | None = Field(default=None, ge=1)
    head_dim: int = Field(ge=1)
    head_dim_v: int | None = Field(default=None, ge=1)
    causal: bool = False
    dtype: Dtype = "bf16"
    phase: Phase = "fwd"
    dropout_p: float = Field(default=0.0, ge=0.0, lt=1.0)

    def __init__(self, **data):
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise PerfsimError(_one_line(exc)) from None

    @model_validator(mode="after")
    def _defaults(self) -> AttentionWorkload:
        for name, source in (("kv_heads", "heads"), ("seqlen_k", "seqlen_q"),
                             ("head_dim_v", "head_dim")):
            if getattr(self, name) is None:
                object.__setattr__(self, name, getattr(self, source))
        if self.heads % self.kv_heads:
            raise ValueError(f"kv_heads ({self.kv_heads}) must divide heads ({self.heads})")
        return self

    # convenient paper notation -------------------------------------------------------
    @property
    def bytes_per_element(self) -> int:
        return BYTES_PER_ELEMENT[self.dtype]

    @property
    def group_size(self) -> int:
        """Query heads per key/value head (``H / H_kv``)."""
        return self.heads // self.kv_heads

    def replace(self, **fields) -> AttentionWorkload:
        """A copy with ``fields`` changed (validated again)."""
        data = self.model_dump()
        # keep derived defaults derived when their source changes
        for name, source in (("kv_heads", "heads"), ("seqlen_k", "seqlen_q"),
                             ("head_dim_v", "head_dim")):
            if source in fields and name not in fields and data[name] == data[source]:
                data[name] = None
        data.update(fields)
        return AttentionWorkload(**data)

    def describe(self) -> str:
        gqa = f", H_kv={self.kv_heads}" if self.kv_heads != self.heads else ""
        nk = f", N_k={self.seqlen_k}" if self.seqlen_k != self.seqlen_q else ""
        dv = f", d_v={self.head_dim_v}" if self.head_dim_v != self.head_dim else ""
        mask = ", causal" if self.causal else ""
        drop = f", dropout {self.dropout_p}" if self.dropout_p else ""
        return (f"B={self.batch}, H={self.heads}{gqa}, N={self.seqlen_q}{nk}, "
                f"d={self.head_dim}{dv}, {self.dtype}{mask}{drop}, {self.phase}")


def _one_line(exc: ValidationError) -> str:
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    if not field:                       # a rule across fields: its message names them
        return f"AttentionWorkload: {msg}"
    value = err.get("input")
    shown = "" if isinstance(value, dict) else f" (got {value!r})"
    return f"AttentionWorkload.{field}: {msg}{shown}"
