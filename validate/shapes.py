"""Shape grids that ``perfsim validate`` measures.

The default grid is the FlashAttention-2/3 papers' benchmark grid (FA2 §4.1, FA3 §4.1,
flash-attn ``benchmarks/benchmark_flash_attention.py``): sequence length 512 … 16k with
``batch = 16384 / seqlen`` (16k tokens per call), hidden size 2048 split as head dim 64 x 32
heads and 128 x 16 heads, causal and not, bf16. It adds the cases where the model's simple
rules are most likely to break: short sequences (128, 256: few tiles per head, launch-bound),
small batches (batch 1 at 2k and 8k: a grid that does not fill the GPU) and GQA (H = 32,
H_kv = 8, d = 128).

Pure Python; no torch.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path

from perfsim.errors import PerfsimError
from perfsim.workload import AttentionWorkload

#: Tokens per call in the FA2/FA3 benchmark grid (batch x seqlen = 16k).
TOKENS_PER_CALL = 16384
#: Hidden size of the benchmark grid, split into (head_dim, heads) pairs.
HEAD_CONFIGS = ((64, 32), (128, 16))
BENCH_SEQLENS = (512, 1024, 2048, 4096, 8192, 16384)
SHORT_SEQLENS = (128, 256)
SMALL_BATCH_SEQLENS = (2048, 8192)
GQA_HEADS, GQA_KV_HEADS, GQA_HEAD_DIM = 32, 8, 128
GQA_SEQLENS = (2048, 8192)


@dataclass(frozen=True)
class Shape:
    """One attention call to measure (paper notation: B, H, H_kv, N_q, N_k, d).

    ``seqlen_k``/``kv_heads`` equal ``seqlen_q``/``heads`` unless given.
    """

    batch: int
    heads: int
    seqlen_q: int
    head_dim: int
    causal: bool
    kv_heads: int | None = None
    seqlen_k: int | None = None
    dtype: str = "bf16"
    phase: str = "fwd"
    #: Dropout probability applied to P inside the kernel (SDPA's ``dropout_p``); 0 = none.
    dropout_p: float = 0.0

    def __post_init__(self):
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)
        if self.seqlen_k is None:
            object.__setattr__(self, "seqlen_k", self.seqlen_q)

    @property
    def key(self) -> str:
        """Stable text key, e.g. ``b16_h16_hkv16_q1024_k1024_d128_causal_bf16_fwd``
        (``..._fwd_drop0.1`` with dropout; keys without dropout are those of earlier runs)."""
        mask = "causal" if self.causal else "full"
        drop = f"_drop{self.dropout_p:g}" if self.dropout_p else ""
        return (f"b{self.batch}_h{self.heads}_hkv{self.kv_heads}_q{self.seqlen_q}_"
                f"k{self.seqlen_k}_d{self.head_dim}_{mask}_{self.dtype}_{self.phase}{drop}")

    def describe(self) -> str:
        gqa = f"/{self.kv_heads}" if self.kv_heads != self.heads else ""
        return (f"B={self.batch} H={self.heads}{gqa} N={self.seqlen_q} d={self.head_dim}"
                f"{' causal' if self.causal else ''}"
                f"{f' dropout {self.dropout_p:g}' if self.dropout_p else ''}")

    def fields(self) -> dict:
        """The shape as flat JSON-ready fields (the columns of a result record); ``dropout_p``
        only when it is not 0, so that records without dropout read as they always did."""
        out = asdict(self)
        if not self.dropout_p:
            del out["dropout_p"]
        return out

    def workload(self) -> AttentionWorkload:
        """The matching :class:`perfsim.AttentionWorkload`."""
        return AttentionWorkload(batch=self.batch, heads=self.heads, kv_heads=self.kv_heads,
                                 seqlen_q=self.seqlen_q, seqlen_k=self.seqlen_k,
                                 head_dim=self.head_dim, causal=self.causal, dtype=self.dtype,
                                 phase=self.phase, dropout_p=self.dropout_p)

    def with_phase(self, phase: str) -> Shape:
        return Shape(**{**self.fields(), "phase": phase})


def _bench(seqlens, head_configs=HEAD_CONFIGS, batch=None) -> list[Shape]:
    return [Shape(batch=batch or TOKENS_PER_CALL // n, heads=h, seqlen_q=n, head_dim=d,
                  causal=causal)
            for n in seqlens for d, h in head_configs for causal in (False, True)]


def _gqa() -> list[Shape]:
    return [Shape(batch=TOKENS_PER_CALL // n, heads=GQA_HEADS, kv_heads=GQA_KV_HEADS,
                  seqlen_q=n, head_dim=GQA_HEAD_DIM, causal=causal)
            for n in GQA_SEQLENS for causal in (False, True)]


def _quick() -> list[Shape]:
    return [Shape(8, 16, 2048, 128, False), Shape(8, 16, 2048, 128, True),
            Shape(16, 32, 1024, 64, True), Shape(1, 16, 8192, 128, True),
            Shape(64, 32, 256, 64, False),
            Shape(8, GQA_HEADS, 2048, GQA_HEAD_DIM, True, kv_heads=GQA_KV_HEADS)]


#: Named grids: ``--grid NAME``.
GRIDS = {
    "bench": lambda: _bench(BENCH_SEQLENS),
    "short": lambda: _bench(SHORT_SEQLENS),
    "small-batch": lambda: _bench(SMALL_BATCH_SEQLENS, batch=1),
    "gqa": _gqa,
    "quick": _quick,
}
GRIDS["default"] = lambda: (GRIDS["bench"]() + GRIDS["short"]() + GRIDS["small-batch"]()
                            + GRIDS["gqa"]())


def grid(name: str, phase: str = "fwd") -> list[Shape]:
    """Shapes of a named grid (:data:`GRIDS`) or of a JSON file (a list of :class:`Shape`
    field objects), in measuring order, all with ``phase``.

    Raises:
        perfsim.PerfsimError: unknown name, unreadable file or bad shape fields.
    """
    if name in GRIDS:
        shapes = GRIDS[name]()
    elif name.endswith(".json") or Path(name).is_file():
        shapes = _from_json(Path(name))
    else:
        raise PerfsimError(f"unknown grid {name!r}; known: {', '.join(sorted(GRIDS))} "
                           "or a .json file listing shapes")
    out = []
    for s in shapes:
        shape = s.with_phase(phase)
        shape.workload()  # validates the fields (PerfsimError on a bad one)
        if shape not in out:
            out.append(shape)
    return out


def _json_kind(value) -> str:
    """The JSON name of a parsed value's type."""
    return {dict: "object", str: "string", bool: "boolean", type(None): "null", int: "number",
            float: "number"}.get(type(value), type(value).__name__)


def _from_json(path: Path) -> list[Shape]:
    """The shapes a grid file lists: a JSON list of objects with :class:`Shape`'s fields
    (``batch``, ``heads``, ``seqlen_q``, ``head_dim``, ``causal`` required).

    Raises:
        perfsim.PerfsimError: an unreadable file, not a non-empty list of objects, or an
            object with a missing or unknown field (named, with the shape's position)."""
    try:
        text = path.read_text()
    except (OSError, ValueError) as exc:
        raise PerfsimError(f"grid file {path}: {exc}") from None
    try:
        items = json.loads(text)
    except ValueError as exc:
        raise PerfsimError(f"grid file {path}: not JSON ({exc}); a grid file is a JSON list "
                           "of shapes, e.g. [{\"batch\": 1, \"heads\": 8, \"seqlen_q\": 1024, "
                           "\"head_dim\": 64, \"causal\": false}]") from None
    # every shape takes the run's --phase (grid(): with_phase), so a file names none (a fresh
    # user's report: a file's "phase" was accepted and overridden without a word)
    names = [f.name for f in fields(Shape) if f.name != "phase"]
    required = [f.name for f in fields(Shape) if f.default is MISSING]
    example = '[{"batch": 1, "heads": 8, "seqlen_q": 1024, "head_dim": 64, "causal": false}]'
    if not isinstance(items, list) or not items:
        got = ("an empty list" if isinstance(items, list)
               else f"{json.dumps(items)[:60]} (a JSON {_json_kind(items)})")
        raise PerfsimError(f"grid file {path}: expected a non-empty JSON list of shapes, e.g. "
                           f"{example}; got {got}")
    shapes = []
    for i, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            raise PerfsimError(f"grid file {path}: shape {i} is {json.dumps(item)[:60]}, not an "
                               f"object with the fields {', '.join(names)}")
        if "phase" in item:
            raise PerfsimError(f"grid file {path}: shape {i}: a grid file names no phase; "
                               "every shape runs the phase --phase gives (fwd or bwd)")
        unknown = [k for k in item if k not in names]
        missing = [k for k in required if k not in item]
        if unknown or missing:
            what = "; ".join(x for x in (
                unknown and f"unknown field(s) {', '.join(unknown)}",
                missing and f"missing {', '.join(missing)}") if x)
            raise PerfsimError(f"grid file {path}: shape {i}: {what}; fields: "
                               f"{', '.join(names)} ({', '.join(required)} required)")
        shape = Shape(**item)
        try:
            shape.workload()
        except PerfsimError as exc:
            raise PerfsimError(f"grid file {path}: shape {i}: {exc}") from None
        shapes.append(shape)
    return shapes
