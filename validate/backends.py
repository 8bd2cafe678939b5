"""The attention kernels users call, as :class:`perfsim.validate.measure.Impl` objects.

* ``sdpa_flash``, ``sdpa_cudnn``, ``sdpa_efficient``, ``sdpa_math`` (the unfused eager
  composite, used by ``validate/external.py``): ``F.scaled_dot_product_attention`` inside
  ``torch.nn.attention.sdpa_kernel`` forcing one backend. A backend that refuses the shape
  raises "No available kernel"; its warnings give the reason, recorded as ``unsupported``.
* ``flex``: ``torch.compile(flex_attention, dynamic=False)`` with a causal ``BlockMask`` built
  once per shape outside the timed call (as users cache it). A failing compile is recorded as
  ``unsupported`` with the compiler's message.

Causal masks are bottom-right aligned (query ``i`` sees key ``j <= i + N_k - N_q``), the
convention of perfsim's workloads and of the float64 reference. With ``N_q == N_k`` SDPA's
``is_causal`` (top-left) is the same mask. Otherwise ``sdpa_flash`` gets
``torch.nn.attention.bias.causal_lower_right`` (its dispatch calls the flash op with
``is_causal=True``, bottom-right in flash-attn >= 2.1; the row is ``unsupported`` unless
``can_use_flash_attention`` holds, so no other kernel is timed in its place), the other SDPA
backends a boolean lower-right ``attn_mask`` when ``N_q < N_k``; with ``N_q > N_k`` the first
``N_q - N_k`` query rows see no key, which a boolean mask turns into NaN rows in those
backends, so they are ``unsupported`` there. FlexAttention's mask takes the offset directly.

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

    mask = None
    if s.causal and s.seqlen_q != s.seqlen_k:
        mask = _lower_right(row, q, k, v, extra)

    def f(a, b, c):
        if mask is not None:
            return F.scaled_dot_product_attention(a, b, c, attn_mask=mask, **extra)
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
           "is_causal": s.causal and mask is None, **extra}
    if mask is not None:
        cfg["mask"] = ("CausalBias lower_right -> aten._scaled_dot_product_flash_attention"
                       "(is_causal=True)" if row.algorithm == "sdpa_flash"
                       else "boolean lower-right attn_mask (N_q, N_k)")
    return Impl(lambda: f(q, k, v), autograd_backward(f, q, k, v), cfg, poisoned=False,
                context=context)


def _lower_right(row: Row, q, k, v, extra):
    """The bottom-right causal mask of a call with ``N_q != N_k`` as SDPA takes it for
    ``row.algorithm`` (module docstring).

    Raises:
        Unsupported: flash cannot take the shape, or a boolean mask would leave query rows
            without keys (``N_q > N_k``).
    """
    import torch

    s = row.shape
    if row.algorithm == "sdpa_flash":
        return flash_lower_right(q, k, v, s.dropout_p, bool(extra.get("enable_gqa")))
    if s.seqlen_q > s.seqlen_k:
        raise Unsupported(f"causal with N_q = {s.seqlen_q} > N_k = {s.seqlen_k}: the first "
                          f"{s.seqlen_q - s.seqlen_k} query rows see no key, and a boolean "
                          "attn_mask makes them NaN in this backend")
    return torch.ones(s.seqlen_q, s.seqlen_k, dtype=torch.bool,
                      device=q.device).tril(s.seqlen_k - s.seqlen_q)


def flash_lower_right(q, k, v, dropout_p: float = 0.0, gqa: bool = False):
    """``torch.nn.attention.bias.causal_lower_right`` for ``q`` ``[B, H, N_q, d]`` and
    ``k``, ``v`` ``[B, H_kv, N_k, d]``: passed as SDPA's ``attn_mask``, its dispatch calls
    the flash op with ``is_causal=True`` (bottom-right in flash-attn >= 2.1).

    Raises:
        Unsupported: ``can_use_flash_attention`` is False for these inputs (its warnings
            give the reason), so that no other kernel is timed as flash.
    """
    import torch
    from torch.nn.attention.bias import causal_lower_right

    try:
        params = torch.backends.cuda.SDPAParams(q, k, v, None, dropout_p, False, gqa)
    except TypeError:  # torch without enable_gqa in SDPAParams
        params = torch.backends.cuda.SDPAParams(q, k, v, None, dropout_p, False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ok = torch.backends.cuda.can_use_flash_attention(params, True)
    if not ok:
        why = "; ".join(str(w.message).splitlines()[0] for w in caught)[:300]
        raise Unsupported("sdpa_flash lower-right causal: can_use_flash_attention is False"
                          + (f" ({why})" if why else ""))
    return causal_lower_right(q.shape[-2], k.shape[-2])


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
