"""Target program for Nsight Compute: one profiled launch of an attention kernel users call.

``ncu --profile-from-start off ... python3 validate/probe_ncu.py CASE`` runs the case's
forward (or forward then backward) three times unprofiled, then once between
``cudaProfilerStart``/``cudaProfilerStop`` so that ncu sees exactly the kernels of one call.
``validate/probe_ncu.sh`` drives it and writes the counters per kernel (pipe utilisation,
issue-slot use, executed instructions by opcode, warp stall reasons, shared-memory wavefronts,
DRAM bytes). The counters are a profile, not a timing: they say which unit is busy and why
the others wait, which is the evidence the mma.sync model is checked against.

Cases are ``IMPL-PHASE-dD`` with IMPL in {flash, cudnn, math, efficient} (SDPA backends,
torch only) or
{cute, tutorial, flex} (built by ``perfsim.validate.external.build``, so perfsim must be
importable: ``probe_ncu.sh`` links it as ``validate/external_h200.sh`` does), PHASE in
{fwd, bwd, dec, pre}, D any head dim (default set 64, 128, 256), and an optional ``-nN`` suffix
for another sequence length (``flex-fwd-d96-n4000``), ``-bB`` and ``-hH`` for another batch
and head count, ``-pP`` for dropout of P percent (SDPA fwd/bwd cases: ``flash-bwd-d128-p10``),
and an optional ``-c`` suffix for a causal mask (``cudnn-bwd-d128-c``); the
shape is B = 1 (or B), H = 4096 // D (or H), N = 4096 (or N), non-causal unless ``-c``
(causal for the tutorial's backward, which has no other mode), bf16
(``dec``: a decode step, :data:`DECODE`; ``pre``: a few query rows against a long cache,
:func:`_few_queries`, with ``-qQ`` query rows and ``-gG`` K/V heads; ``-gG`` also gives an
SDPA fwd/bwd case, or a cute/tutorial/flex case, G K/V heads: ``flash-bwd-d128-h32-g8``,
``cute-bwd-d128-h32-g8``)
(``python3 validate/probe_ncu.py --list`` prints the default set). torch is imported inside
``main``.
"""

from __future__ import annotations

import sys

IMPLS = ("flash", "cudnn")
PHASES = ("fwd", "bwd")
HEAD_DIMS = (64, 128, 256)
SEQLEN = 4096
HEADS_TOTAL = 64
#: Decode cases (``PHASE = dec``): B, H, H_kv, N_k — one query token.
DECODE = (8, 32, 8, 32768)


#: Case prefix -> ``perfsim.validate.external`` implementation name.
EXTERNAL = {"cute": "cute", "tutorial": "triton_tutorial", "flex": "flex"}
#: Every case prefix -> the external grid's implementation name (the reports that pair a
#: profile with the grid's rows or presets: ``external_report``, ``per_clock``).
NCU_IMPLS = {"flash": "sdpa_flash", "cudnn": "sdpa_cudnn", "efficient": "sdpa_efficient",
             **EXTERNAL}


def _profile_once(fn, warmup: int = 3) -> None:
    """``fn`` ``warmup`` times unprofiled, then once between cudaProfilerStart/Stop."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


def _external(impl: str, phase: str, d: int, case: str, seqlen: int = SEQLEN, batch: int = 1,
              heads: int | None = None, causal: bool = False,
              kv_heads: int | None = None) -> int:
    """One call of an implementation the external grid times, through its own builder
    (``kv_heads``: the ``-gG`` K/V heads, grouped-query attention; default the query heads)."""

    from perfsim.validate import external
    from perfsim.validate.shapes import Shape

    if phase == "dec":      # a decode step: few CTAs, tensor pipes mostly idle
        shape = Shape(batch=DECODE[0], heads=DECODE[1], kv_heads=DECODE[2], seqlen_q=1,
                      seqlen_k=DECODE[3], head_dim=d, causal=False, phase="fwd")
    else:
        # the tutorial's backward computes causal attention only
        shape = Shape(batch=batch, heads=heads or HEADS_TOTAL * 64 // d, seqlen_q=seqlen,
                      head_dim=d, kv_heads=kv_heads,
                      causal=causal or (impl == "triton_tutorial" and phase == "bwd"),
                      phase=phase)
    q, k, v, do = external.make_inputs(shape, case)
    built = external.build(shape, impl, q, k, v)
    with built.context():
        _profile_once(built.backward_fn(built.make_do(do)) if phase == "bwd"
                      else built.forward)
    print(f"{case}: {shape} done")
    return 0


def _few_queries(impl: str, d: int, extra: dict, causal: bool) -> int:
    """An SDPA call with few query rows (``PHASE = pre``: N_q = ``-qQ``, default 16) against
    N_k = ``-nN`` keys, B = ``-bB``, H = ``-hH`` (default 32), H_kv = ``-gG`` (default H). With
    ``-c`` the mask is causal aligned bottom-right as ``validate/external_decode.py`` passes it:
    ``causal_lower_right`` for flash, a boolean (N_q, N_k) ``attn_mask`` for cuDNN and the
    memory-efficient kernel."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
               "efficient": SDPBackend.EFFICIENT_ATTENTION}[impl]
    heads = extra["h"] or 32
    kv_heads = extra["g"] or heads
    n_q, n_k, batch = extra["q"], extra["n"], extra["b"]
    q = torch.randn(batch, heads, n_q, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(batch, kv_heads, n_k, d, device="cuda", dtype=torch.bfloat16)
            for _ in range(2))
    kw = {"enable_gqa": kv_heads != heads}
    if causal and impl == "flash":
        from torch.nn.attention.bias import causal_lower_right

        kw["attn_mask"] = causal_lower_right(n_q, n_k)
    elif causal:
        kw["attn_mask"] = torch.ones(n_q, n_k, dtype=torch.bool,
                                     device="cuda").tril(diagonal=n_k - n_q)
    with sdpa_kernel(backend):
        _profile_once(lambda: F.scaled_dot_product_attention(q, k, v, **kw))
    print(f"{impl}-pre: B={batch} H={heads} H_kv={kv_heads} N_q={n_q} N_k={n_k} d={d} "
          f"causal={causal} done")
    return 0


def cases() -> list[str]:
    return [f"{i}-{p}-d{d}" for i in IMPLS for p in PHASES for d in HEAD_DIMS]


def parse_case(name: str) -> dict:
    """The shape of case ``name`` (``IMPL-PHASE-dD[-nN][-bB][-hH][-qQ][-gG][-pP][-c]``, the
    module docstring): ``impl``, ``phase``, ``head_dim``, ``seqlen``, ``batch``, ``heads``
    (``4096 // d`` by default: :data:`HEADS_TOTAL` x 64 / d), ``causal``, ``dropout_p`` and the
    raw ``extra`` tokens. Raises ``ValueError`` naming the expected form."""
    parts = name.split("-")
    causal = parts[-1] == "c"
    if causal:
        parts = parts[:-1]
    extra = {"n": SEQLEN, "b": 1, "h": None, "q": 16, "g": None, "p": 0}
    ok = len(parts) >= 3 and parts[2].startswith("d") and parts[2][1:].isdecimal() \
        and parts[2][1:].isascii()
    for token in parts[3:]:
        ok = ok and token[:1] in extra and token[1:].isdecimal() and token[1:].isascii()
        if ok:
            extra[token[0]] = int(token[1:])
    if not ok:
        raise ValueError(f"case {name!r}: expected "
                         "IMPL-PHASE-dD[-nN][-bB][-hH][-qQ][-gG][-pP][-c] "
                         "(e.g. flex-fwd-d96-n4000, cudnn-bwd-d128-n256-b64-h16-c)")
    impl, phase, dname = parts[:3]
    d = int(dname[1:])
    if d < 1:
        raise ValueError(f"case {name!r}: the head dim (dD) must be at least 1")
    return {"impl": impl, "phase": phase, "head_dim": d, "seqlen": extra["n"],
            "batch": extra["b"], "heads": extra["h"] or HEADS_TOTAL * 64 // d,
            "causal": causal, "dropout_p": extra["p"] / 100, "extra": extra}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] == "--list":
        print("\n".join(cases()))
        return 0
    try:
        shape = parse_case(argv[0])
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    impl, phase, d, causal, extra = (shape["impl"], shape["phase"], shape["head_dim"],
                                     shape["causal"], shape["extra"])
    seqlen, batch, heads = shape["seqlen"], shape["batch"], shape["heads"]
    dropout_p = shape["dropout_p"]
    if dropout_p and (impl in EXTERNAL or phase in ("dec", "pre")):
        raise SystemExit(f"case {argv[0]!r}: -pP (dropout) goes with an SDPA fwd/bwd case")
    if phase == "dec" and len(argv[0].split("-")) - causal > 3:
        raise SystemExit(f"case {argv[0]!r}: a decode case takes its shape from DECODE")
    if phase == "pre" and impl in ("flash", "cudnn", "efficient"):
        return _few_queries(impl, d, extra, causal)
    if impl in EXTERNAL:
        return _external(EXTERNAL[impl], phase, d, argv[0], seqlen, batch, heads, causal,
                         extra["g"] or None)
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
               "math": SDPBackend.MATH, "efficient": SDPBackend.EFFICIENT_ATTENTION}[impl]
    # -gG: G K/V heads (grouped-query attention, SDPA's enable_gqa)
    kv_heads = extra["g"] or heads
    q = torch.randn(batch, heads, seqlen, d, device="cuda", dtype=torch.bfloat16,
                    requires_grad=(phase == "bwd"))
    k, v = (torch.randn(batch, kv_heads, seqlen, d, device="cuda", dtype=torch.bfloat16,
                        requires_grad=(phase == "bwd")) for _ in range(2))
    gqa = kv_heads != heads
    if phase == "dec":
        batch, heads, kv_heads, n_k = DECODE
        q = torch.randn(batch, heads, 1, d, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(batch, kv_heads, n_k, d, device="cuda", dtype=torch.bfloat16)
                for _ in range(2))
        gqa = True
    with sdpa_kernel(backend):
        def call():
            out = F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa, is_causal=causal,
                                                 dropout_p=dropout_p)
            if phase == "bwd":
                out.backward(torch.ones_like(out))
        _profile_once(call)
    print(f"{argv[0]}: B={batch} H={heads} H_kv={kv_heads} N={seqlen} d={d} causal={causal} "
          "done")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
