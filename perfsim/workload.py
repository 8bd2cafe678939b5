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

Length: one pydantic model whose every field (decode, windows, varlen, paged and quantised
caches, softcap, dropout) carries its validation and a one-line error naming what is allowed;
the notation table above serves the whole package.
"""

from __future__ import annotations

import math
from typing import Annotated, ClassVar, Literal

import numpy as np
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from perfsim.errors import Immutable, PerfsimError
from perfsim.errors import short_repr as _short
from perfsim.gpu import BYTES_PER_ELEMENT, Dtype

Phase = Literal["fwd", "bwd", "fwd_bwd"]
PHASES = ("fwd", "bwd", "fwd_bwd")

#: Largest Q, K, V or O tensor a workload may describe, in bytes: 2**45 B = 32 TiB, more than
#: a hundred times the memory of any GPU (the largest in 2026 hold 288 GB). Beyond it no GPU
#: could hold the inputs, and counts would leave the range of float64 arithmetic.
MAX_TENSOR_BYTES = 2**45
#: Largest value of any size field (batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim,
#: head_dim_v): a tensor with all other sizes 1 and 1-byte elements at MAX_TENSOR_BYTES.
MAX_SIZE = MAX_TENSOR_BYTES


def _strict_int(value):
    """An integer, and only an integer: ``bool``, strings and floats are refused (numpy
    integers are accepted and converted)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"must be an integer, not {type(value).__name__}")
    return int(value)


def _strict_bool(value):
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ValueError(f"must be true or false, not {type(value).__name__}")


def _strict_float(value):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"must be a number, not {type(value).__name__}")
    try:
        value = float(value)
    except OverflowError:           # an int past float's range (10**400)
        raise ValueError("must be a finite number") from None
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


def _strict_str(value):
    if not isinstance(value, str):
        raise ValueError(f"must be a string, not {type(value).__name__}")
    return value


Size = Annotated[int, BeforeValidator(_strict_int), Field(ge=1, le=MAX_SIZE)]
WindowBound = Annotated[int, BeforeValidator(_strict_int), Field(ge=0, le=MAX_SIZE)] | None
#: Most sequences a variable-length batch may list (its lengths are enumerated).
MAX_SEQUENCES = 2**20


def _window(value):
    # an empty cell: "" in a sweep's CSV, NaN once pandas' read_csv has read it
    if value is None or value == "" or (isinstance(value, float) and math.isnan(value)):
        return (None, None)
    if isinstance(value, str):          # a sweep column, "LEFT,RIGHT" ("none" = unbounded)
        parts = [p.strip().lower() for p in value.split(",")]
        if len(parts) == 2:
            return tuple(None if p == "none" else int(p) if p.isdigit() else p for p in parts)
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return tuple(value)
    raise ValueError("must be (left, right): two integers >= 0 or None")


def _lengths(value):
    if value is None:
        return None
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError("must be a non-empty list of sequence lengths")
    if len(value) > MAX_SEQUENCES:
        raise ValueError(f"at most {MAX_SEQUENCES} sequences")
    return tuple(_strict_int(v) for v in value)


def _contiguous_as_none(value):
    """``page_size`` 0 (an integer, as sweeps write contiguous K/V) as ``None``; a negative
    one refused with what is allowed (the field's own bound would say only "≥ 1")."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        if value == 0:
            return None
        if value < 0:
            raise ValueError("must be a page size of at least 1 key, or 0 (or None) for "
                             "contiguous K/V")
    return value


def _name(value):
    """A dtype or phase name in any case (``"FP16"`` as ``"fp16"``, as the CLI takes it)."""
    return _strict_str(value).strip().lower()


def _name_or_none(value):
    return None if value is None else _name(value)


_SIZE_FIELDS = ("batch", "heads", "kv_heads", "seqlen_q", "seqlen_k", "head_dim", "head_dim_v")
#: Fields that default to another field's value: ``kv_heads`` to ``heads``, ``seqlen_k`` to
#: ``seqlen_q``, ``head_dim_v`` to ``head_dim``, ``kv_dtype`` to ``dtype``.
_FOLLOWS = {"kv_heads": "heads", "seqlen_k": "seqlen_q", "head_dim_v": "head_dim",
            "kv_dtype": "dtype"}


class AttentionWorkload(Immutable, BaseModel):
    """One multi-head attention call ``O = softmax(Q Kᵀ / sqrt(d) [+ mask]) V``.

    Shapes: Q ``[B, H, N_q, d]``, K ``[B, H_kv, N_k, d]``, V ``[B, H_kv, N_k, d_v]``,
    O ``[B, H, N_q, d_v]``.

    Every size field is an integer (not a bool, string or float) in ``[1, 2**45]``, and each
    of Q, K, V and O may hold at most :data:`MAX_TENSOR_BYTES` = 2**45 bytes (32 TiB, far
    beyond any GPU's memory).

    Args:
        batch: ``B`` ≥ 1.
        heads: ``H`` ≥ 1 query heads.
        kv_heads: ``H_kv``; defaults to ``heads``; must divide ``heads`` (GQA/MQA).
        seqlen_q: ``N_q`` ≥ 1.
        seqlen_k: ``N_k`` ≥ 1; defaults to ``seqlen_q``.
        head_dim: ``d`` ≥ 1.
        head_dim_v: ``d_v``; defaults to ``head_dim``.
        causal: bottom-right aligned causal mask. With one query row (``N_q = 1``) it hides
            no key; flash-attn 2's forward then launches its unmasked kernel (``mha_fwd``),
            the other kernels keep their masked launch.
        dtype: element type of Q, K, V, O: fp32, tf32 (fp32 storage, TF32 matmuls), fp16,
            bf16, fp8_e4m3 (whose O is bf16, as flash-attn 3 and 4 write it:
            ``Dims.e_o``). One exception, named in the prediction's notes: the ``fa3``
            algorithm's default ``quantize_inputs=True`` models FlashAttention-3 §3.3's fp8
            path, which receives 16-bit Q, K and V and quantises them in a preparation kernel
            every call (for a decode step that is the whole cache); for tensors already in
            fp8 use ``FA3(quantize_inputs=False)`` or the ``flash-attn-3`` preset, and for an
            fp8 K/V cache under 16-bit queries ``kv_dtype``.
        phase: ``fwd``, ``bwd`` (backward alone, forward outputs given) or ``fwd_bwd``.
        dropout_p: attention dropout probability in [0, 1). Each algorithm charges its
            reference kernel's random draws (``softmax_costs.DROPOUT_INSTRUCTIONS``) or refuses
            it; dropout can also change the launch (flash-attn 2 narrows its key tile and
            never splits K/V with dropout), so a call with dropout is not always slower.
        window: ``(left, right)`` sliding window: query ``i`` sees keys
            ``[i + off − left, i + off + right]`` with ``off = N_k − N_q`` (the mask is
            aligned bottom-right, the FlashAttention ≥ 2.1 convention, also for ``N_q < N_k``);
            ``None`` on a side is unbounded. ``causal=True`` is ``(None, 0)``; both together
            take the narrower right edge. Each bound an integer ≥ 0 or ``None``. A sweep's
            ``window`` column (``"LEFT,RIGHT"``, empty for none) reads back as it is written,
            an empty cell also as the NaN pandas' ``read_csv`` makes of it.
        seqlens_q, seqlens_k: variable-length batch (``cu_seqlens`` kernels): one query and
            one key length per sequence. ``batch`` then equals their count (and defaults to
            it), ``seqlen_q``/``seqlen_k`` are the largest (the ``max_seqlen`` the kernels
            take; defaults; a given one must equal it). Either alone: the other side has
            ``seqlen_q`` (``seqlen_k``) for every sequence; ``seqlens_k`` defaults to
            ``seqlens_q`` (self-attention).
        kv_dtype: element type of K and V (e.g. an ``fp8_e4m3`` cache under ``bf16``
            queries); defaults to ``dtype``.
        page_size: ``None`` for contiguous K/V (or 0, as a sweep's ``page_size`` column
            writes it: a row reads back as its workload), else tokens per page of a paged KV
            cache read through a page table (vLLM-style, as flash-attn's
            ``page_table``/``block_table``).
        softcap: tanh score capping ``s ← c · tanh(s / c)`` (Gemma 2 style); 0 = none.

    Raises:
        perfsim.PerfsimError: one message naming the field and what is allowed.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    REPLACE_AS: ClassVar[str] = "w"      # (Immutable's message)

    batch: Size | None = None
    heads: Size
    kv_heads: Size | None = None
    seqlen_q: Size | None = None
    seqlen_k: Size | None = None
    head_dim: Size
    head_dim_v: Size | None = None
    causal: Annotated[bool, BeforeValidator(_strict_bool)] = False
    dtype: Annotated[Dtype, BeforeValidator(_name)] = "bf16"
    phase: Annotated[Phase, BeforeValidator(_name)] = "fwd"
    dropout_p: Annotated[float, BeforeValidator(_strict_float)] = Field(default=0.0, ge=0.0,
                                                                        lt=1.0)
    window: Annotated[tuple[WindowBound, WindowBound],
                      BeforeValidator(_window)] = (None, None)
    seqlens_q: Annotated[tuple[Size, ...] | None, BeforeValidator(_lengths)] = None
    seqlens_k: Annotated[tuple[Size, ...] | None, BeforeValidator(_lengths)] = None
    kv_dtype: Annotated[Dtype | None, BeforeValidator(_name_or_none)] = None
    page_size: Annotated[Size | None, BeforeValidator(_contiguous_as_none)] = None
    softcap: Annotated[float, BeforeValidator(_strict_float)] = Field(default=0.0, ge=0.0)

    def __init__(self, **data):
        # a follower given as None is left out, as if not given: it follows its source, now
        # and through replace() (pydantic's model_fields_set holds the fields given)
        data = {k: v for k, v in data.items() if not (k in _FOLLOWS and v is None)}
        for name, value in data.items():   # before pydantic, which cannot print 10**5000
            if name not in _SIZE_FIELDS or not isinstance(value, int) or isinstance(value, bool):
                continue
            if value > MAX_SIZE:
                raise PerfsimError(
                    f"AttentionWorkload.{name}: must be at most 2**45 = {MAX_SIZE} (sizes are "
                    f"bounded by what any GPU could hold; got {_short(value)})")
            if value < -MAX_SIZE:
                raise PerfsimError(f"AttentionWorkload.{name}: Input should be greater than or "
                                   f"equal to 1 (got {_short(value)})")
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise PerfsimError(_one_line(exc)) from None

    @model_validator(mode="after")
    def _defaults(self) -> AttentionWorkload:
        self._varlen_defaults()
        if self.kv_dtype is None:
            object.__setattr__(self, "kv_dtype", self.dtype)
        for name, source in (("kv_heads", "heads"), ("seqlen_k", "seqlen_q"),
                             ("head_dim_v", "head_dim")):
            if getattr(self, name) is None:
                object.__setattr__(self, name, getattr(self, source))
        if self.heads % self.kv_heads:
            raise ValueError(f"kv_heads ({self.kv_heads}) must divide heads ({self.heads})")
        e, e_kv = BYTES_PER_ELEMENT[self.dtype], BYTES_PER_ELEMENT[self.kv_dtype]
        for tensor, rows, heads, cols, width in (
                ("Q", self.seqlen_q, self.heads, self.head_dim, e),
                ("K", self.seqlen_k, self.kv_heads, self.head_dim, e_kv),
                ("V", self.seqlen_k, self.kv_heads, self.head_dim_v, e_kv),
                ("O", self.seqlen_q, self.heads, self.head_dim_v, e)):
            size = self.batch * heads * rows * cols * width
            if size > MAX_TENSOR_BYTES:
                dtype = self.kv_dtype if tensor in "KV" else self.dtype
                raise ValueError(
                    f"{tensor} would hold {size} bytes ({dtype}); at most 2**45 = "
                    f"{MAX_TENSOR_BYTES} bytes (32 TiB) per tensor, far beyond any GPU's memory")
        return self

    def _varlen_defaults(self) -> None:
        sq, sk = self.seqlens_q, self.seqlens_k
        if sq is None and sk is None:
            for name in ("batch", "seqlen_q"):
                if getattr(self, name) is None:
                    raise ValueError(f"{name} is required (or give seqlens_q for a "
                                     "variable-length batch)")
            return
        n = len(sq if sq is not None else sk)
        if sq is not None and sk is not None and len(sk) != len(sq):
            raise ValueError(f"seqlens_q lists {len(sq)} sequences and seqlens_k {len(sk)}: "
                             "one length per sequence on each side")
        if self.batch is not None and self.batch != n:
            raise ValueError(f"batch ({self.batch}) must equal the number of sequences ({n}) "
                             "of a variable-length batch")
        object.__setattr__(self, "batch", n)
        if sq is None:
            if self.seqlen_q is None:
                raise ValueError("seqlen_q is required with seqlens_k alone (give seqlens_q too, "
                                 "or one seqlen_q for every sequence)")
            sq = (self.seqlen_q,) * n
        if sk is None:
            sk = sq if self.seqlen_k is None else (self.seqlen_k,) * n
        for name, longest in (("seqlen_q", max(sq)), ("seqlen_k", max(sk))):
            given = getattr(self, name)
            if given is not None and given != longest:
                raise ValueError(f"{name} ({given}) is the batch's longest sequence and must "
                                 f"equal max(seqlens) = {longest} (or be left out)")
            if given is None:
                object.__setattr__(self, name, longest)
        object.__setattr__(self, "seqlens_q", tuple(sq))
        object.__setattr__(self, "seqlens_k", tuple(sk))

    @property
    def varlen(self) -> bool:
        """A variable-length batch (``seqlens_q``/``seqlens_k`` given)."""
        return self.seqlens_q is not None

    @property
    def masked(self) -> bool:
        """Some score is hidden by the causal mask or a window."""
        return self.causal or self.window != (None, None)

    # convenient paper notation -------------------------------------------------------
    @property
    def bytes_per_element(self) -> int:
        """Bytes per element of ``dtype``."""
        return BYTES_PER_ELEMENT[self.dtype]

    @property
    def group_size(self) -> int:
        """Query heads per key/value head (``H / H_kv``)."""
        return self.heads // self.kv_heads

    def replace(self, **fields) -> AttentionWorkload:
        """A copy with ``fields`` changed (validated again).

        A field that defaults to another — ``kv_heads`` to ``heads``, ``seqlen_k`` to
        ``seqlen_q``, ``head_dim_v`` to ``head_dim``, ``kv_dtype`` to ``dtype`` — follows a
        changed source where it was not given when this workload was built (or was given as
        ``None``); one that was given keeps its value:
        ``AttentionWorkload(..., seqlen_q=4096).replace(seqlen_q=1)`` has ``seqlen_k = 1``,
        ``AttentionWorkload(..., seqlen_q=4096, seqlen_k=4096).replace(seqlen_q=1)`` keeps
        ``seqlen_k = 4096`` (a decode step against the same cache). Per-sequence lengths
        given to a fixed-length workload (``replace(seqlens_q=(1024, 77))``) set ``batch``
        and the longest length of their side, unless those are given too.

        Raises:
            perfsim.PerfsimError: a field fails validation, or ``seqlens_q=None`` on a batch
                of unequal query lengths without the ``seqlen_q`` (and ``batch``) that
                replace them.
        """
        if self.varlen and "seqlens_q" in fields and fields["seqlens_q"] is None:
            fields = self._without_query_lengths(fields)
        data = self.model_dump()
        # a field left to follow its source (not given when this workload was built) follows
        # the new source; one given keeps its value even where it equals its source
        for name in _FOLLOWS:
            if name not in fields and name not in self.model_fields_set:
                del data[name]
        if self.varlen and not ({"seqlens_q", "seqlens_k", "batch"} & set(fields)):
            pass                      # a varlen batch keeps its lengths
        elif not self.varlen:
            # per-sequence lengths given to a fixed-length workload: the batch and the longest
            # lengths follow them (unless given); the other side's length, if it has no list,
            # stays every sequence's
            for name, lengths in (("seqlen_q", "seqlens_q"), ("seqlen_k", "seqlens_k")):
                if fields.get(lengths) is not None:
                    for follower in ("batch", name):
                        if follower not in fields:
                            data[follower] = None
        else:
            for name in ("batch", "seqlen_q", "seqlen_k"):
                if name not in fields:
                    data[name] = None
            # self-attention keys follow new query lengths, as they did when built
            if ("seqlens_q" in fields and "seqlens_k" not in fields
                    and data["seqlens_k"] == data["seqlens_q"]):
                data["seqlens_k"] = None
        data.update(fields)
        return AttentionWorkload(**data)

    def _without_query_lengths(self, fields: dict) -> dict:
        """``replace``'s fields when they drop the per-sequence query lengths: equal lengths
        become ``seqlen_q`` (and ``batch``, where the key lengths go too) by themselves;
        unequal ones need ``seqlen_q`` given (and ``batch`` unless ``seqlens_k`` stays).

        Raises:
            perfsim.PerfsimError: naming what to give, with this batch's numbers."""
        keys_stay = (fields["seqlens_k"] is not None if "seqlens_k" in fields
                     else self.seqlens_k != self.seqlens_q)
        lengths = set(self.seqlens_q)
        if len(lengths) == 1:           # nothing but the batch's one length is dropped
            return {"seqlen_q": self.seqlen_q, **({} if keys_stay else {"batch": self.batch}),
                    **fields}
        need = [f for f in ("seqlen_q", "batch")
                if f not in fields and (f == "seqlen_q" or not keys_stay)]
        if need:
            example = ", ".join(f"{f}={getattr(self, f)}" for f in ("batch", "seqlen_q")
                                if f in need)
            raise PerfsimError(
                "AttentionWorkload.replace: seqlens_q=None drops the per-sequence query "
                f"lengths {self.seqlens_q}; give {' and '.join(need)} in the same call, e.g. "
                f"replace(seqlens_q=None, {example})")
        return fields

    def describe(self) -> str:
        """A one-line description, e.g. ``B=4, H=16, N=4096, d=128, bf16, causal, fwd``."""
        gqa = f", H_kv={self.kv_heads}" if self.kv_heads != self.heads else ""
        nk = f", N_k={self.seqlen_k}" if self.seqlen_k != self.seqlen_q else ""
        dv = f", d_v={self.head_dim_v}" if self.head_dim_v != self.head_dim else ""
        mask = ", causal" if self.causal else ""
        drop = f", dropout {self.dropout_p}" if self.dropout_p else ""
        extra = ""
        if self.window != (None, None):
            # as the CLI and a sweep's column write it ("none,0"), not as a Python tuple
            extra += ", window " + ",".join("none" if v is None else str(v) for v in self.window)
        if self.varlen:
            extra += (f", varlen {sum(self.seqlens_q)} q / {sum(self.seqlens_k)} k tokens")
        if self.kv_dtype != self.dtype:
            extra += f", KV {self.kv_dtype}"
        if self.page_size:
            extra += f", page {self.page_size}"
        if self.softcap:
            extra += f", softcap {self.softcap:g}"
        return (f"B={self.batch}, H={self.heads}{gqa}, N={self.seqlen_q}{nk}, "
                f"d={self.head_dim}{dv}, {self.dtype}{mask}{drop}{extra}, {self.phase}")


def _one_line(exc: ValidationError) -> str:
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    if not field:                       # a rule across fields: its message names them
        return f"AttentionWorkload: {msg}"
    if err["type"] == "extra_forbidden":         # pydantic's words for an unknown name
        return (f"AttentionWorkload has no field {field}; fields: "
                f"{', '.join(AttentionWorkload.model_fields)}")
    value = err.get("input")
    if err["type"] == "less_than_equal" and field != "dropout_p":
        msg += " (2**45: sizes are bounded by what any GPU could hold)"
    shown = "" if isinstance(value, dict) else f" (got {_short(value)})"
    if field.startswith("window.") and err["type"] == "greater_than_equal":
        # flash-attn's convention is -1 for an unbounded side
        shown += "; an unbounded side is None (flash-attn's -1; \"none\" in a sweep config)"
    return f"AttentionWorkload.{field}: {msg}{shown}"
