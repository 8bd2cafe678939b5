"""The attention kernels users call, as :class:`perfsim.validate.measure.Impl` objects.

* ``sdpa_flash``, ``sdpa_cudnn``, ``sdpa_efficient``, ``sdpa_math`` (the unfused eager
  composite, used by ``validate/external.py``): ``F.scaled_dot_product_attention`` inside
  ``torch.nn.attention.sdpa_kernel`` forcing one backend. A backend that refuses the shape
  raises "No available kernel"; its warnings give the reason, recorded as ``unsupported``.
* ``flex``: ``torch.compile(flex_attention, dynamic=False)`` with a causal ``BlockMask`` built
  once per shape outside the timed call (as users cache it). A failing compile is recorded as
  ``unsupported`` with the compiler's message.

Causal masks: every shape here has ``N_q == N_k``, where SDPA's top-left ``is_causal`` equals the
bottom-right convention of the own kernels.

Dropout: a shape's ``dropout_p`` goes to SDPA as ``dropout_p`` (every SDPA backend draws the
mask inside its kernel); FlexAttention has none and refuses it.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager

from perfsim.validate.measure import Impl, Unsupported, autograd_backward
from perfsim.validate.runner import Row

SDPA_BACKENDS = {"sdpa_flash": "FLASH_ATTENTION", "sdpa_cudnn": "CUDNN_ATTENTION",
                 "sdpa_efficient": "EFFICIENT_ATTENTION", "sdpa_math": "MATH"}
#: Dynamo recompiles per new shape with ``dynamic=False``; past its default limit (8) it
#: would silently fall back to eager flex_attention, which must never be timed as "flex".
DYNAMO_RECOMPILE_LIMIT = 1024

_FLEX = {}


def impl(row: Row, q, k, v) -> Impl:
    """:class:`Impl` for an external backend.

    Raises:
        Unsupported: the backend is not available in this torch, or refuses the shape.
    """
    if row.algorithm in SDPA_BACKENDS:
        return _sdpa(row, q, k, v)
    if row.algorithm == "flex":
        return _flex(row, q, k, v)
    raise Unsupported(f"unknown external backend {row.algorithm!r}")


def _sdpa(row: Row, q, k, v) -> Impl:
    import torch
    import torch.nn.functional as F

    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as exc:
        raise Unsupported(f"torch.nn.attention.sdpa_kernel missing: {exc}") from None
    name = SDPA_BACKENDS[row.algorithm]
    backend = getattr(SDPBackend, name, None)
    if backend is None:
        raise Unsupported(f"SDPBackend.{name} does not exist in torch {torch.__version__}")
    s = row.shape
    extra = {"enable_gqa": True} if s.kv_heads != s.heads else {}
    if s.dropout_p:
        extra["dropout_p"] = s.dropout_p    # drawn inside the fused kernels (Philox)

    def f(a, b, c):
        return F.scaled_dot_product_attention(a, b, c, is_causal=s.causal, **extra)

    @contextmanager
    def context():
        with sdpa_kernel([backend]), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                yield
            except RuntimeError as exc:
                if "No available kernel" not in str(exc):
                    raise
                why = "; ".join(str(w.message).splitlines()[0] for w in caught)[:400]
                raise Unsupported(f"SDPBackend.{name}: no available kernel"
                                  + (f" ({why})" if why else "")) from None

    cfg = {"backend": f"SDPBackend.{name}", "torch": torch.__version__,
           "is_causal": s.causal, **extra}
    return Impl(lambda: f(q, k, v), autograd_backward(f, q, k, v), cfg, poisoned=False,
                context=context)


def _compiled_flex():
    import torch

    if "fn" not in _FLEX:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        cfg = torch._dynamo.config
        for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit",
                     "accumulated_cache_size_limit"):
            if hasattr(cfg, name):
                setattr(cfg, name, max(getattr(cfg, name), DYNAMO_RECOMPILE_LIMIT))
        _FLEX["fn"] = torch.compile(flex_attention, dynamic=False)
        _FLEX["create_block_mask"] = create_block_mask
    return _FLEX["fn"], _FLEX["create_block_mask"]


def _flex(row: Row, q, k, v) -> Impl:
    import torch

    try:
        flex, create_block_mask = _compiled_flex()
    except Exception as exc:  # noqa: BLE001 - any import/compile setup failure
        raise Unsupported(f"flex_attention unavailable: {type(exc).__name__}: {exc}") from None
    s = row.shape
    if s.dropout_p:
        raise Unsupported("flex_attention has no dropout")
    offset = s.seqlen_k - s.seqlen_q
    block_mask = None
    if s.causal:
        def causal(b, h, q_idx, kv_idx):
            return kv_idx <= q_idx + offset

        block_mask = create_block_mask(causal, B=None, H=None, Q_LEN=s.seqlen_q,
                                       KV_LEN=s.seqlen_k, device="cuda")
    extra = {"enable_gqa": True} if s.kv_heads != s.heads else {}

    def f(a, b, c):
        return flex(a, b, c, block_mask=block_mask, **extra)

    @contextmanager
    def context():
        try:
            yield
        except torch.cuda.OutOfMemoryError:
            raise
        except Exception as exc:
            if type(exc).__module__.startswith(("torch._dynamo", "torch._inductor")):
                first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
                raise Unsupported(f"torch.compile(flex_attention) failed: "
                                  f"{type(exc).__name__}: {first}") from None
            raise

    cfg = {"backend": "torch.compile(flex_attention, dynamic=False)",
           "torch": torch.__version__, "block_mask": "causal" if s.causal else None, **extra}
    return Impl(lambda: f(q, k, v), autograd_backward(f, q, k, v), cfg, poisoned=False,
                context=context)
