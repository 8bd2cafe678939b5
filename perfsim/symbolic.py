"""Closed forms: each algorithm's counts as sympy expressions, and the crossovers they imply.

The expressions come from the code ``perfsim.predict`` runs: ``Algorithm.kernels(Dims(...),
gpu)`` is called with sympy symbols for the sizes (``perfsim.mathops`` turns ``⌈·⌉``, ``min``
and ``where`` into ``ceiling``, ``Min`` and ``Piecewise``; causal tile counts become ``Sum``\\ s),
then totalled by ``perfsim.prediction.Counts.total``. Nothing is written twice.

Symbols (the glossary of ``perfsim.workload``): ``B, H, H_kv, N_q, N_k, d, d_v`` (sizes),
``B_r, B_c`` (tile rows/columns), ``M`` (SRAM per CTA in elements, FA1 Algorithm 1) and ``L_2``
(L2 bytes). Tile options become ``B_r``/``B_c`` where the algorithm's code accepts a symbolic
tile (FA3 derives its warp count from its query tile, so that one stays at the algorithm's
default); an algorithm with an SRAM option (FA1) gets ``sram_bytes = M·e`` so that its tiles
follow Algorithm 1 line 1.

L2: perfsim's L2 rule (``perfsim.algorithms.base.l2_filtered``) serves re-reads from L2 when
their working set fits, and a falling share of them up to twice the L2's size, which shows up as
``Piecewise`` terms. ``io_model=True`` drops them:
every re-read goes to HBM, as in the FA1 paper's IO analysis (Theorem 2), which has no cache;
``keep_l2=True`` keeps the L2 size as the symbol ``L_2``.

Closed forms count the tiles as visited; the numeric path also times the padding of partial
tiles on the SM units (``perfsim.algorithms.base.with_whole_tiles``), and flash-attn 2 and
FlexAttention run a head dim between compiled ones at the next compiled width (closed forms
keep d and d_v as they are), so SM-side times agree at tile multiples and compiled head dims;
so do the backward's dQ accumulator bytes (zeroed, reduced into and read back at the compiled
kernel's head dim by ``predict``, at ``d`` here).
Closed forms leave out the floor the L2's TMA row segments put under an FA3-class kernel's
memory path (``KernelCost.l2_request_seconds``, numeric shapes only;
:func:`compute_bound_seqlen`, which evaluates numeric lengths, includes it). They also leave
out the per-tile bound checks a kernel runs when a length is not a multiple of its tile
(``FusedAttention.bound_check_terms``: ALU and FMA-pipe instructions per score element), and
the census of flash-attn 2's causal or windowed forward mask (``FusedAttention.mask_terms``,
``softmax_costs.MASK_CENSUS``: it depends on the compiled head dim, a symbol here; closed
forms charge ``MASK_ALU_OPS_PER_SCORE``), so ``alu_ops`` and ``fp32_flops`` agree where
neither runs — lengths that are multiples of the tile (of 128 for FlexAttention and cuDNN),
for flash-attn 2's backward also a compiled head dim of at most 128 equal to the call's, no
window, no varlen, and no mask on a flash-attn 2 forward at a compiled head dim up to 128
(``bound_checks="flash-attn"``: there ``predict`` charges the census, 4.5 % more FP32 work at
head dim 64 and 6.9 % at 128 for a causal N = 1024 call).
The other counts (tensor FLOPs, bytes, exps) agree everywhere for the same tiles
(``tests/test_symbolic.py``). Tiles left to FA2 (``options={}``) are fixed stand-ins while the
sizes are symbols (``fa2.SYMBOLIC_FWD_TILE``, ``SYMBOLIC_BWD_TILE``: flash-attn 2's launch table
is not consulted, even at a numeric head dim), so its shared-memory bytes differ from
``predict`` where that table picks another tile or warp layout (the backward at d = 64: 128 x 128
there, 64 x 128 here); give the tiles, or keep them as ``B_r``/``B_c``, to compare.
The crossovers compare unit times: an unpipelined kernel's load waits
(``KernelCost.load_chain``, e.g. ``FA1(pipelined=False)``) are not part of them, nor a
backward's waits inside its loop (``KernelCost.step_waits``: ``sdpa-efficient``'s locked dQ
accumulation, taken with no key splits for symbolic dims), nor are register-spill reloads
(``KernelCost.local_load_bytes``; the presets' compiled spill figures are not taken for symbolic
dims, e.g. ``sdpa-cudnn``'s with dropout), nor a single-stage K/V ring's loads
(``KernelCost.ring_loads``, ``FA3(stages=1)``: not set for symbolic dims).
:func:`mufu_crossover` compares the MUFU with the slowest other unit; where a kernel's stations
run in turn (``FA3.serial_stations``) every unit adds to the time and the crossover only says
where the exps stop being the largest term, and on an ``mma.sync`` kernel
(``base.MMA_SYNC_SERIAL``) the exps stop mattering only where the MUFU's time plus its lead
falls under the FP32 work's, which the crossover, taken against the slowest other unit, does not
solve for.

Closed forms take one split-KV part and no GQA packing (``num_splits="auto"`` and
``pack_gqa="auto"`` resolve per shape, which a symbol cannot do): they equal
``perfsim.predict`` with ``num_splits=1, pack_gqa=False`` (``perfsim.sweep.single_split``).

Length: one module for the closed forms because every helper here (symbols, substitution,
crossover solving, the rendered table) works on the same sympy expressions of
``Algorithm.kernels``; split by role it would pass them around half-built.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import sympy
from pydantic import BaseModel

from perfsim import algorithms as algos
from perfsim.algorithms.base import unknown_option_hint
from perfsim.errors import PerfsimError
from perfsim.errors import short_repr as _short
from perfsim.gpu import BYTES_PER_ELEMENT
from perfsim.gpu_catalog import load_gpu
from perfsim.implementations import resolve
from perfsim.kernel import ADDITIVE, UNITS
from perfsim.predict import predict
from perfsim.prediction import Counts
from perfsim.timing import (
    TimingParams,
    check_timing,
    cuda_core_seconds,
    gemm_seconds,
    l2_request_path_seconds,
    memory_path_seconds,
    rates,
)
from perfsim.workload import MAX_SIZE, PHASES

_int = {"positive": True, "integer": True}
B, H, H_kv, N_q, N_k, d, d_v = sympy.symbols("B H H_kv N_q N_k d d_v", **_int)
B_r, B_c, M, L_2 = sympy.symbols("B_r B_c M L_2", **_int)
#: Size symbols by ``Dims`` field name (``counts(..., N_k=N_q)`` substitutes one).
SIZES = {"B": B, "H": H, "H_kv": H_kv, "N_q": N_q, "N_k": N_k, "d": d, "d_v": d_v}
#: Algorithm tile options that become symbols.
TILE_SYMBOLS = {"block_m": B_r, "block_r": B_r, "bwd_block_m": B_r,
                "block_n": B_c, "block_c": B_c, "bwd_block_n": B_c}
#: Totals returned by :func:`counts` (as ``Prediction.counts``) plus the footprint.
COUNTS = ("flops", "tensor_flops", "fp32_flops", "exp_ops", "emulated_exp_ops", "hbm_bytes",
          "smem_bytes", "memory_bytes")


def counts(algorithm="fa2", gpu="h100-sxm5", *, causal=False, dtype="bf16", phase="fwd",
           dropout_p=0.0, io_model=False, keep_l2=False, options: dict | None = None,
           window=(None, None), **sizes) -> dict[str, sympy.Expr]:
    """Totals over the algorithm's kernels as sympy expressions (FLOP, ops, bytes).

    Args:
        algorithm: a name (``perfsim.algorithms.names()``) or a config; its options are kept
            unless ``options`` replaces them.
        gpu: catalog id, profile path or ``GPUSpec`` (rates, capacities, L2).
        causal, dtype, phase, dropout_p: the workload's scalar fields.
        window: ``(left, right)`` sliding window, numbers or sympy expressions (e.g.
            ``(sympy.Symbol("w"), 0)``): the tile counts become sums over query tiles
            (``perfsim.tiles.mask_visits``).
        io_model: no L2: every re-read goes to HBM (see the module docstring).
        keep_l2: leave the L2 size as the symbol ``L_2`` (bytes) instead of the GPU's.
        options: algorithm options, numbers or sympy expressions: names and numbers are
            checked as the algorithm's class checks them (:func:`_check_options`); default
            the tile symbols described in the module docstring.
        **sizes: numbers or expressions for ``B, H, H_kv, N_q, N_k, d, d_v`` (e.g.
            ``N_k=N_q, d_v=d``); the others stay symbols.

    Returns:
        ``{name: expression}`` for :data:`COUNTS`.

    Raises:
        perfsim.PerfsimError: an unknown size or algorithm, or an algorithm whose code
            branches on a size left symbolic (the message names the condition; give that
            size a number or set the option); a bad argument (a size that is not a positive
            integer up to 2**45, a flag that is not true or false, a ``dropout_p`` outside
            [0, 1), a ``window`` that is not a pair, ``options`` that are not a dict, name an
            option the algorithm lacks or give one a value its class refuses).
        perfsim.InfeasibleError: the configuration cannot run on this GPU.
    """
    _check_flags(causal=causal, io_model=io_model, keep_l2=keep_l2)
    kernels, memory = _kernels(algorithm, gpu, causal, dtype, phase, dropout_p,
                               "none" if io_model else "symbol" if keep_l2 else "gpu",
                               options, sizes, _window(window))
    totals = Counts.of_costs(kernels)
    out = {name: sympy.sympify(getattr(totals, name)) for name in COUNTS[:-1]}
    return {**out, "memory_bytes": memory}


def unit_seconds(algorithm="fa2", gpu="h100-sxm5", *, causal=False, dtype="bf16",
                 phase="fwd", dropout_p=0.0, io_model=False, keep_l2=False,
                 options: dict | None = None, timing: TimingParams | dict | None = None,
                 **sizes) -> dict[str, sympy.Expr]:
    """Each unit's time alone (s), summed over kernels: demand / rate with the demand and
    rates ``perfsim.timing.time_kernel`` uses, without its tail effect and launch overhead.

    Arguments as :func:`counts`; ``timing``: efficiency factors (default for the GPU), a
    ``TimingParams`` or a dict of fields replacing the GPU's defaults (as ``predict``).
    """
    _check_flags(causal=causal, io_model=io_model, keep_l2=keep_l2)
    spec = load_gpu(gpu)
    kernels, _ = _kernels(algorithm, spec, causal, dtype, phase, dropout_p,
                          "none" if io_model else "symbol" if keep_l2 else "gpu",
                          options, sizes)
    if isinstance(timing, dict):        # as predict takes it: the GPU's defaults, replaced
        timing = TimingParams.for_gpu(spec, **timing)
    check_timing(timing)
    totals = _unit_totals(kernels, spec, timing or TimingParams.for_gpu(spec))
    return {u: sympy.sympify(t) for u, t in totals.items()}


def _unit_totals(kernels, gpu, params) -> dict:
    """Per unit, Σ demand / rate over ``kernels`` (the demand and rates of
    ``perfsim.timing.time_kernel``, without its tail effect). The ``hbm`` unit is each
    kernel's memory path, or the L2's time for its TMA row segments and fp32 reductions where
    that is longer (``perfsim.timing.l2_request_path_seconds``; the segments are numeric
    shapes only, 0 in a closed form); not the CTAs' load path."""
    out = dict.fromkeys(UNITS, 0)
    for k in kernels:
        rate = rates(gpu, k, params)
        demand = {**k.sm_demand(), "hbm": k.hbm_bytes}
        for u in UNITS:
            if u == "hbm":
                value = memory_path_seconds(k, gpu, rate[u])
                floor = l2_request_path_seconds(k, gpu)
                if not (isinstance(floor, (int, float)) and floor == 0):
                    value = max(value, floor)
            elif u == "fp32":
                value = cuda_core_seconds(demand["fp32"], demand.get("alu", 0), rate,
                                          k.cuda_cores_in_turn)
            elif u == "tensor" and k.gemms:
                value = gemm_seconds(k, demand[u], rate)
            else:
                value = demand[u] / rate[u]
            out[u] = out[u] + value
    return out


def _check_call(dtype, phase, numeric: bool = False, **numbers) -> None:
    """One PerfsimError for a dtype or phase perfsim does not know, or a size that is not a
    positive integer up to 2**45 (``perfsim.workload.MAX_SIZE``; symbols and expressions
    pass, unless ``numeric``: they are the point of this module).

    Raises:
        perfsim.PerfsimError: naming the argument and what is allowed."""
    if not isinstance(dtype, str) or dtype not in BYTES_PER_ELEMENT:
        raise PerfsimError(f"dtype {dtype!r} is not one of {', '.join(BYTES_PER_ELEMENT)}")
    if not isinstance(phase, str) or phase not in PHASES:
        raise PerfsimError(f"phase {phase!r} is not one of {', '.join(PHASES)}")
    _check_sizes(numeric, **numbers)


def _check_sizes(numeric: bool = False, **numbers) -> None:
    """Each of ``numbers`` a positive integer up to 2**45, or (unless ``numeric``) a sympy
    expression.

    Raises:
        perfsim.PerfsimError: naming the argument and what is allowed."""
    for name, value in numbers.items():
        _check_integer(name, value, 1, numeric)


def _check_integer(name: str, value, low: int, numeric: bool = False, also: str = "") -> None:
    """``value`` an integer from ``low`` to 2**45 (``perfsim.workload.MAX_SIZE``), or, unless
    ``numeric``, a sympy expression with symbols (``also``: what else the message should list
    as allowed, e.g. ``"None, "``).

    Raises:
        perfsim.PerfsimError: naming ``name`` and what is allowed."""
    if isinstance(value, sympy.Basic) and not value.is_number and not numeric:
        return
    if (isinstance(value, bool) or not isinstance(value, (int, np.integer, sympy.Integer))
            or not low <= value <= MAX_SIZE):
        what = "a positive integer up to 2**45" if low == 1 else \
            f"an integer from {low} to 2**45"
        expr = "" if numeric else " (or a sympy expression)"
        raise PerfsimError(f"{name} must be {also}{what}{expr}, got {_short(value)}")


def _check_flags(**flags) -> None:
    """Each of ``flags`` is true or false (``causal="yes"`` was read as true).

    Raises:
        perfsim.PerfsimError: naming the flag."""
    for name, value in flags.items():
        if not isinstance(value, (bool, np.bool_)):
            raise PerfsimError(f"{name} must be True or False, got {_short(value)}")


def _window(window) -> tuple:
    """``window`` as a ``(left, right)`` pair, each side None, an integer from 0 to 2**45 or
    a sympy expression.

    Raises:
        perfsim.PerfsimError: not a pair, or a side that is none of those."""
    if not isinstance(window, (tuple, list)) or len(window) != 2:
        raise PerfsimError(f"window must be a (left, right) pair, got {_short(window)}")
    for side in window:
        if side is not None:
            _check_integer("window sides", side, 0, also="None, ")
    return tuple(window)


def _check_scalars(dropout_p, options) -> None:
    """``dropout_p`` a probability in [0, 1) (``AttentionWorkload``'s rule), ``options`` a
    dict or None.

    Raises:
        perfsim.PerfsimError: naming the argument and what is allowed."""
    if (isinstance(dropout_p, (bool, np.bool_))
            or not isinstance(dropout_p, (int, float, np.integer, np.floating))
            or not 0 <= dropout_p < 1):
        raise PerfsimError(f"dropout_p must be a probability in [0, 1), got {_short(dropout_p)}")
    if options is not None and not isinstance(options, dict):
        raise PerfsimError(f"options must be a dict of algorithm options (or None for the "
                           f"tile symbols), got {_short(options)}")


def _kernels(algorithm, gpu, causal, dtype, phase, dropout_p, l2: str, options, sizes,
             window=(None, None)):
    """The algorithm's kernels on symbols, with L2 per ``l2``: ``gpu``, ``none`` or
    ``symbol``; and the memory footprint."""
    unknown = sorted(set(sizes) - set(SIZES))
    if unknown:
        raise PerfsimError(f"unknown size(s) {', '.join(unknown)}; sizes: {', '.join(SIZES)}")
    _check_call(dtype, phase, **sizes)
    _check_group(sizes.get("H"), sizes.get("H_kv"))
    _check_scalars(dropout_p, options)
    spec = load_gpu(gpu)
    algo = resolve(algorithm)
    dims = algos.Dims(*(sympy.sympify(sizes.get(n, s)) for n, s in SIZES.items()),
                      causal, dtype, phase, dropout_p, window=window)
    if options is not None:
        _check_options(algo, options)
    else:
        _single_part(algo, {})
    tries = [options] if options is not None else _default_options(algo, dims.e)
    for i, opts in enumerate(tries):
        config = type(algo).model_construct(**{**algo.model_dump(), **opts})
        try:
            # pydantic's unchecked copy: the L2 size is a symbol, no number GPUSpec takes
            kernels = config.kernels(dims, BaseModel.model_copy(spec, update={"l2_bytes": L_2}))
            memory = sympy.sympify(config.memory_bytes(dims, spec))
        except TypeError as exc:   # the code branched on a symbol
            if i + 1 < len(tries):
                continue
            raise PerfsimError(f"{algo.label()}: {exc}; give that size a number or set the "
                               "option") from None
        break
    if l2 == "none":
        return [_map_counts(k, _drop_l2) for k in kernels], memory
    if l2 == "symbol":
        return [_map_counts(k, sympy.sympify) for k in kernels], memory
    return [_map_counts(k, lambda e: sympy.sympify(e).subs(L_2, spec.l2_bytes))
            for k in kernels], memory


def _check_group(heads, kv_heads) -> None:
    """With both given as numbers, ``H_kv`` divides ``H`` (each K/V head serves ``H / H_kv``
    query heads: GQA), as ``AttentionWorkload`` requires.

    Raises:
        perfsim.PerfsimError: naming both sizes."""
    numbers = [v for v in (heads, kv_heads)
               if v is not None and not (isinstance(v, sympy.Basic) and not v.is_number)]
    if len(numbers) == 2 and int(heads) % int(kv_heads):
        raise PerfsimError(f"H_kv ({kv_heads}) must divide H ({heads}): each K/V head serves "
                           "H / H_kv query heads (GQA)")


def _check_options(algo, options: dict) -> None:
    """``options`` as the algorithm's class takes them: each name one of its options, each
    value without symbols (a sympy or numpy number as the Python number it is) valid by the
    class's own rules (``FA2(block_m=0)`` is refused, and so is ``options={"block_m": 0}``),
    an integer at most 2**45 as the sizes; expressions with symbols pass as they are.

    Raises:
        perfsim.PerfsimError: naming the option and what is allowed."""
    cls = type(algo)
    unknown = [k for k in options if k not in cls.model_fields]
    if unknown:
        raise PerfsimError(f"{cls.name} has no option {', '.join(map(str, unknown))}"
                           f"{unknown_option_hint(unknown, cls.model_fields)}; options: "
                           f"{', '.join(cls.model_fields)}")
    concrete = {}
    for key, value in options.items():
        if isinstance(value, sympy.Basic):
            if not value.is_number:
                continue                # a symbol or an expression of symbols
            value = int(value) if value.is_Integer else float(value) if value.is_real else value
        elif isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_SIZE:
            raise PerfsimError(f"{cls.name} option {key}: must be at most 2**45 (as the "
                               f"sizes), got {_short(value)}")
        concrete[key] = value
    cls(**{**{k: getattr(algo, k) for k in algo.model_fields_set}, **concrete})
    _single_part(algo, options)


def _single_part(algo, options: dict) -> None:
    """Refuse a split-KV count above one or GQA packing, asked in ``options`` or set on the
    algorithm config: the closed forms take one split and no packing (module docstring), and
    would otherwise drop them without a word.

    Raises:
        perfsim.PerfsimError: naming the options."""
    given = {**{k: getattr(algo, k) for k in ("num_splits", "pack_gqa")
                if k in type(algo).model_fields}, **options}
    asked = [f"{k}={given[k]!r}" for k, off in (("num_splits", (1, "auto")),
                                                ("pack_gqa", (False, "auto")))
             if k in given and given[k] not in off]
    if asked:
        raise PerfsimError(f"{algo.label()}: {', '.join(asked)}: the closed forms take one "
                           "split-KV part and no GQA packing (num_splits 1 or 'auto', pack_gqa "
                           "False or 'auto'); perfsim.predict prices the split or packed call")


def _default_options(algo, e: int) -> list[dict]:
    """Candidate options, most symbolic first: SRAM as ``M``, else tiles as ``B_r, B_c``
    (then ``B_c`` only, then the algorithm's own symbolic defaults)."""
    fields = type(algo).model_fields
    given = algo.model_fields_set           # options the caller set: kept as they are
    if "sram_bytes" in fields and "sram_bytes" not in given:
        return [{"sram_bytes": M * e, "q_splits": algo.q_splits or 1}
                if "q_splits" in fields else {"sram_bytes": M * e}]
    tiles = {k: v for k, v in TILE_SYMBOLS.items() if k in fields and k not in given}
    columns = {k: v for k, v in tiles.items() if v is B_c}
    return [tiles, columns, {}]


def _drop_l2(expr):
    """The L2 rule's ``Piecewise`` (hits while the working set fits in ``L_2``, then a falling
    share) → its last branch: no hits."""
    return sympy.sympify(expr).replace(
        lambda x: isinstance(x, sympy.Piecewise) and x.has(L_2), lambda x: x.args[-1].expr)


def _map_counts(kernel, fn):
    """The kernel with ``fn`` applied to each additive count and each named term."""
    return replace(kernel, terms={k: fn(v) for k, v in kernel.terms.items()},
                   **{f: fn(getattr(kernel, f)) for f in ADDITIVE})


def smooth(expr: sympy.Expr) -> sympy.Expr:
    """``expr`` with ``⌈x⌉`` and ``⌊x⌋`` replaced by ``x`` (whole tiles → fractional tiles):
    the asymptotic form, e.g. FA1's ``Θ(N² d² / M)``."""
    return _expression(expr, "smooth").replace(sympy.ceiling, lambda x: x).replace(
        sympy.floor, lambda x: x)


def evaluator(expr) -> Callable[..., float | dict]:
    """A fast numeric function of an expression (or of a dict of them, giving a dict),
    called with keywords named after the free symbols (``f(N_q=1024, d=64)``; extra ones
    are ignored). Generated once by ``sympy.lambdify``; ``Sum`` terms run as Python loops.

    Raises (when called):
        perfsim.PerfsimError: a free symbol not given (the message lists them); a value that
            is not a finite real number, or not positive (non-negative) where the symbol is
            (every size symbol is positive; ``W`` non-negative); a result outside float64's
            range.
    """
    many = isinstance(expr, dict)
    exprs = [_expression(e, "evaluator") for e in (expr.values() if many else [expr])]
    names = sorted(set().union(*(e.free_symbols for e in exprs)), key=str)
    fn = sympy.lambdify(names, exprs, modules="math")
    keys = [str(n) for n in names]

    def evaluate(**values):
        missing = [k for k in keys if k not in values]
        if missing:
            raise PerfsimError(f"evaluator: give {', '.join(missing)} (the expression's free "
                               f"symbols: {', '.join(keys)})")
        for name, key in zip(names, keys):
            _check_value(key, values[key], name)
        try:
            out = [float(v) for v in fn(*(values[k] for k in keys))]
        except (OverflowError, ZeroDivisionError):     # values past float64's range
            out = [math.inf]
        if not all(math.isfinite(v) for v in out):
            raise PerfsimError("evaluator: the result is not a finite float64 at "
                               + ", ".join(f"{k}={_short(values[k])}" for k in keys))
        return dict(zip(expr, out)) if many else out[0]

    return evaluate


def _check_value(key: str, value, symbol: sympy.Symbol) -> None:
    """A value for ``symbol`` in :func:`evaluator`: a finite real number, positive (or
    non-negative) where the symbol is declared so.

    Raises:
        perfsim.PerfsimError: naming the symbol and what is allowed."""
    number = isinstance(value, (int, float, np.integer, np.floating, sympy.Number)) \
        and not isinstance(value, (bool, np.bool_))
    try:
        finite = number and math.isfinite(float(value))
    except OverflowError:                   # an int past float's range
        finite = False
    if not finite:
        raise PerfsimError(f"evaluator: {key} must be a finite number, got {_short(value)}")
    if symbol.is_positive and not value > 0:
        raise PerfsimError(f"evaluator: {key} must be > 0 (a size), got {_short(value)}")
    if symbol.is_nonnegative and not value >= 0:
        raise PerfsimError(f"evaluator: {key} must be >= 0, got {_short(value)}")


def _expression(expr, who: str) -> sympy.Expr:
    """``expr`` as a sympy expression (a number, a sympy expression, or text sympy parses).

    Raises:
        perfsim.PerfsimError: anything else (None, a list, a bool, text that does not parse)."""
    if not isinstance(expr, (bool, np.bool_)):
        try:
            out = sympy.sympify(expr)
        except (sympy.SympifyError, TypeError, SyntaxError):
            out = None
        if isinstance(out, sympy.Expr):
            return out
    raise PerfsimError(f"{who}: expects a sympy expression or a number, got {_short(expr)}")


# ------------------------------------------------------------------ crossovers
def _first_true(test: Callable[[int], bool], lo: int, hi: int) -> int | None:
    """Smallest integer in ``[lo, hi]`` where ``test`` holds (assumed monotone), else None."""
    if not test(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if test(mid) else (mid + 1, hi)
    return lo


def compute_bound_seqlen(algorithm, gpu, *, batch: int, heads: int, head_dim: int,
                         causal: bool = False, dtype: str = "bf16", phase: str = "fwd",
                         io_model: bool = False, max_seqlen: int = 2**22) -> int | None:
    """The smallest ``N = N_q = N_k`` at which the tensor cores' time reaches the HBM time:
    the arithmetic intensity passes the GPU's ridge point (the 5090 post's roofline
    criterion). Evaluated on the kernels ``predict`` times (the algorithm's own tile choice
    for ``head_dim``), unit by unit as :func:`unit_seconds` (no tail effect, no launch
    overhead; the HBM side is the memory path, or the L2's TMA row segments where longer),
    by bisection on ``N``; ``io_model`` as in :func:`counts`.

    Returns:
        ``N``, or ``None`` if the tensor time stays below the HBM time up to ``max_seqlen``
        (e.g. standard attention, whose intensity tends to a constant).

    Raises:
        perfsim.PerfsimError: a size (or ``max_seqlen``) that is not an integer from 1 to
            2**45, an unknown dtype, phase, algorithm or GPU, a flag that is not true or
            false.
        perfsim.InfeasibleError: the configuration cannot run on this GPU.
    """
    _check_call(dtype, phase, numeric=True, batch=batch, heads=heads, head_dim=head_dim,
                max_seqlen=max_seqlen)
    _check_flags(causal=causal, io_model=io_model)
    spec = load_gpu(gpu)
    if io_model:
        spec = spec.replace(l2_bytes=1)
    algo, params = resolve(algorithm), TimingParams.for_gpu(spec)

    def compute_bound(n: int) -> bool:
        dims = algos.Dims(batch, heads, heads, n, n, head_dim, head_dim, causal, dtype, phase)
        t = _unit_totals(algo.kernels(dims, spec), spec, params)
        return t["tensor"] >= t["hbm"]

    return _first_true(compute_bound, 1, max_seqlen)


def sram_crossover(gpu, *, batch: int, heads: int, seqlen: int, head_dim: int,
                   algorithm="fa1", baseline="standard", dtype: str = "bf16",
                   causal: bool = False, phase: str = "fwd") -> int | None:
    """The SRAM size ``M`` (elements per CTA) below which ``algorithm`` moves more HBM bytes
    than ``baseline`` (cache-free IO model, FA1 Theorem 2 and Proposition 3): the smallest
    ``M ≥ d`` with ``hbm(algorithm, M) ≤ hbm(baseline)``; ``None`` if none below 2⁴⁰.

    Raises:
        perfsim.PerfsimError: ``algorithm`` has no SRAM option (``sram_bytes``); a baseline
            whose HBM bytes the sizes do not fix (its tiles left as symbols); a size that
            is not an integer from 1 to 2**45, an unknown dtype, phase, algorithm or GPU.
    """
    _check_call(dtype, phase, numeric=True, batch=batch, heads=heads, seqlen=seqlen,
                head_dim=head_dim)
    _check_flags(causal=causal)
    if "sram_bytes" not in type(resolve(algorithm)).model_fields:
        raise PerfsimError(f"{algorithm} has no sram_bytes option to vary")
    sizes = {"B": batch, "H": heads, "H_kv": heads, "N_q": seqlen, "N_k": seqlen,
             "d": head_dim, "d_v": head_dim}
    kw = {"causal": causal, "dtype": dtype, "phase": phase, "io_model": True, **sizes}
    ours = evaluator(counts(algorithm, gpu, **kw)["hbm_bytes"])
    base = counts(baseline, gpu, **kw)["hbm_bytes"]
    if getattr(base, "free_symbols", None):
        names = ", ".join(sorted(str(x) for x in base.free_symbols))
        raise PerfsimError(f"sram_crossover: the baseline {baseline!r}'s HBM bytes still hold "
                           f"{names} at these sizes (its tiles are symbols); give a baseline "
                           "whose traffic the sizes fix, e.g. 'standard', or compare two "
                           "expressions of perfsim.symbolic.counts yourself")
    theirs = float(base)
    return _first_true(lambda m: ours(M=m) <= theirs, head_dim, 2**40)


def mufu_crossover(workload, gpu, algorithm="fa4", rel: float = 1e-6) -> float | None:
    """The MUFU rate (exp ops/clk/SM) at which ``algorithm``'s exps take as long as the unit
    they compete with: the slowest other unit of the heaviest kernel (for FA3/FA4, the MMA
    station of the MMA ⇄ softmax cycle). Below it the exp unit is the bottleneck; above it
    faster exps still help a pipelined kernel a little (the cycle's queueing), but no longer
    set its pace.

    Solved on the full model (``perfsim.predict`` on ``gpu.replace(mufu_ops_per_clk_per_sm=
    r)``) by bisection in log r, because the exp demand itself may depend on the rate (FA4
    tunes its emulated-exp share to it). ``None`` if the kernel has no exps; ``inf`` if the
    exps still take longer at 2⁴⁰ times the GPU's rate.

    ``rel``: the bisection's width in log r (a relative tolerance on the rate), a finite
    number > 0 and below 1 (a tolerance of 100 % or more says nothing about the rate); the
    bisection also stops after :data:`MUFU_BISECTION_STEPS` halvings or when float64 cannot
    split the interval further (a tolerance below ~1e-15 is not reachable).

    Raises:
        perfsim.PerfsimError: ``rel`` not a finite number > 0 and < 1 (0 never ended); a
            workload, GPU or algorithm ``perfsim.predict`` refuses.
    """
    if (isinstance(rel, (bool, np.bool_)) or not isinstance(rel, (int, float, np.integer,
                                                                 np.floating))
            or not 0 < rel < 1):                    # (an int past float's range too)
        raise PerfsimError(f"mufu_crossover: rel must be a finite number > 0 and < 1 (the "
                           f"relative tolerance on the rate, e.g. 1e-6), got {_short(rel)}")
    spec = load_gpu(gpu)
    base = spec.mufu_ops_per_clk_per_sm

    def excess(rate: float) -> float:
        p = predict(workload, spec.replace(mufu_ops_per_clk_per_sm=rate), algorithm)
        k = max(p.kernels, key=lambda kt: kt.seconds)
        others = max(t for u, t in k.unit_seconds.items() if u not in ("mufu", "fp32"))
        return float(k.unit_seconds["mufu"]) - float(others)

    if predict(workload, spec, algorithm).counts.exp_ops == 0:
        return None
    lo = hi = math.log(base)
    while excess(math.exp(lo)) < 0:          # exps already faster: search below
        lo -= math.log(2)
        if lo < math.log(base) - 40 * math.log(2):
            return 0.0
    while excess(math.exp(hi)) > 0:
        hi += math.log(2)
        if hi > math.log(base) + 40 * math.log(2):
            return math.inf
    for _ in range(MUFU_BISECTION_STEPS):
        mid = (lo + hi) / 2
        if hi - lo <= rel or not lo < mid < hi:     # done, or at float64's resolution
            break
        lo, hi = (mid, hi) if excess(math.exp(mid)) > 0 else (lo, mid)
    return math.exp(hi)


#: Most halvings :func:`mufu_crossover` makes: the bracket starts one factor of 2 wide
#: (ln 2 in log r), and 64 halvings take it below float64's resolution (2⁻⁵² relative).
MUFU_BISECTION_STEPS = 64


__all__ = ["COUNTS", "L_2", "SIZES", "B", "B_c", "B_r", "H", "H_kv", "M", "N_k", "N_q",
           "compute_bound_seqlen", "counts", "d", "d_v", "evaluator", "mufu_crossover",
           "smooth", "sram_crossover", "unit_seconds"]


#: The window symbol of the closed forms (keys before the diagonal a query sees).
W = sympy.Symbol("w", integer=True, nonnegative=True)


def window_pairs(seqlen=N_q, window=W):
    """Score elements a causal sliding window of ``window`` earlier keys leaves in a square
    ``N x N`` matrix: ``N·(w + 1) − w·(w + 1)/2`` for ``N > w`` (each row sees ``w + 1`` keys
    except the first ``w``), ``N·(N + 1)/2`` otherwise — linear in ``N·w``, against ``N²/2``
    for the causal mask. Equals ``perfsim.tiles.visible_pairs(N, N, w, 0)`` at every size."""
    _check_sizes(seqlen=seqlen)
    _check_integer("window", window, 0)
    n, w = sympy.sympify(seqlen), sympy.sympify(window)
    return sympy.Piecewise((n * (w + 1) - w * (w + 1) / 2, n > w), (n * (n + 1) / 2, True))


def decode_kv_bytes(kv_dtype="bf16"):
    """HBM bytes a decode step must read at least: the K/V cache, ``e_kv·B·H_kv·N_k·(d +
    d_v)`` — whatever the query heads and tokens, once each K/V tile is read once per K/V
    head (GQA packing)."""
    if not isinstance(kv_dtype, str) or kv_dtype not in BYTES_PER_ELEMENT:
        raise PerfsimError(f"kv_dtype {_short(kv_dtype)} is not one of "
                           f"{', '.join(BYTES_PER_ELEMENT)}")
    return BYTES_PER_ELEMENT[kv_dtype] * B * H_kv * N_k * (d + d_v)
