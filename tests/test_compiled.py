"""perfsim.compiled: traced numpy code compiled to native loops gives numpy's results.

Three layers: each operation the emitter knows against numpy on edge values (negative and
zero divisors, NaN, infinities, ties); what a trace refuses or guards; and whole sweeps of
every algorithm and preset, ``engine="compiled"`` against ``engine="numpy"``, with a check
that the compiled path ran (``perfsim.compiled.STATS``)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("llvmlite")
pytest.importorskip("numba")

import perfsim  # noqa: E402
from perfsim import compiled  # noqa: E402
from perfsim.errors import PerfsimError  # noqa: E402
from perfsim.implementations import implementations  # noqa: E402
from perfsim.mathops import shortcut_all, take  # noqa: E402

INTS = np.array([-7, -3, -1, 0, 1, 2, 3, 7, 10, 2**40, -(2**40)], dtype=np.int64)
FLOATS = np.array([-7.5, -3.0, -1.0, -0.0, 0.0, 0.25, 1.0, 2.5, 7.0, 1e300, -1e-300,
                   np.inf, -np.inf, np.nan])


def _compile(fn, inputs: dict):
    """``fn``'s trace on ``inputs``, compiled, run on the same inputs."""
    tr = compiled.trace(fn, inputs)
    return compiled.run(compiled.generate(tr), inputs)


def _pairs(values):
    a, b = np.meshgrid(values, values, indexing="ij")
    return {"a": a.ravel().copy(), "b": b.ravel().copy()}


def _same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    if want.dtype.kind == "f":
        assert np.array_equal(np.isnan(got), np.isnan(want))
        ok = np.isnan(want) | (got == want)
        # -0.0 and 0.0 compare equal: check the sign of zeros too
        ok &= np.signbit(got) == np.signbit(want)
        assert ok.all(), (got[~ok], want[~ok])
    else:
        assert np.array_equal(got.astype(want.dtype), want)


BINARY = ["add", "subtract", "multiply", "true_divide", "floor_divide", "remainder",
          "maximum", "minimum", "fmax", "fmin", "greater", "greater_equal", "less",
          "less_equal", "equal", "not_equal", "power"]


@pytest.mark.parametrize("name", BINARY + ["right_shift", "left_shift"])
@pytest.mark.parametrize("values", [INTS, FLOATS], ids=["int64", "float64"])
def test_binary_ufuncs_match_numpy(name, values):
    if name == "power" and values.dtype.kind == "i":
        pytest.skip("integer power: the emitter refuses it (numpy evaluates those rows)")
    if name.endswith("_shift") and values.dtype.kind == "f":
        pytest.skip("shifts are integer ufuncs (numpy refuses floats)")
    ufunc = getattr(np, name)
    inputs = _pairs(values)
    with np.errstate(all="ignore"):
        if name in ("floor_divide", "remainder"):
            # computed through a double quotient, exact while it stays under 2^52 (integers:
            # operands within 2^53); a row past that sends the block to numpy
            if values.dtype.kind == "i":
                inputs = _pairs(np.append(values, [2**62, -(2**60)]))
                large = (np.abs(inputs["a"]) > 2**53) | (np.abs(inputs["b"]) > 2**53)
            else:
                quotient = np.abs(inputs["a"] / inputs["b"])
                large = (quotient >= 2.0**52) & np.isfinite(inputs["a"]) & (inputs["b"] != 0)
            assert large.any()
            assert _compile(lambda t: {"out": ufunc(t["a"], t["b"])}, inputs) is None
            inputs = {k: v[~large] for k, v in inputs.items()}
        want = ufunc(inputs["a"], inputs["b"])
        got = _compile(lambda t: {"out": ufunc(t["a"], t["b"])}, inputs)["out"]
    if name == "power":         # libm pow through LLVM: numpy's loop may differ in a last bit
        assert compiled.same({"out": got}, {"out": want}) is None
    else:
        _same_bits(got, want)


def test_a_block_evaluates_in_c_order_with_one_input_per_axis():
    """The kernel loops over the sequence-length axis outside and the (batch, heads) pairs
    inside, writing length-major; ``run`` gives the block back in C order, each input read
    along its own axis, and the guards checked on every row."""
    a = np.array([1, 2, 3], dtype=np.int64)
    b = np.array([10, 20, 30, 40], dtype=np.int64)
    c = np.array([100.0, 200.0, 300.0, 400.0, 500.0])

    def fn(t):
        return {"out": t["a"] * 7 + t["b"] * t["c"] - t["c"] / t["a"],
                "big": t["b"] > 25}

    axes = {"a": 0, "b": 1, "c": 2}
    sample = {"a": a[:, None, None], "b": b[None, :, None], "c": c[None, None, :]}
    tr = compiled.trace(fn, sample)
    got = compiled.run(compiled.generate(tr, axes), {"a": a, "b": b, "c": c}, (3, 4, 5))
    want = fn(sample)
    for key in want:
        _same_bits(got[key].reshape(3, 4, 5), np.broadcast_to(want[key], (3, 4, 5)))


@pytest.mark.parametrize("name", ["floor_divide", "remainder"])
def test_float_divmod_matches_numpy_near_whole_quotients(name):
    """The emitted fmod (a rounded quotient, truncated, corrected by one) on quotients
    within a few ulps of whole numbers, where the rounded quotient crosses the integer, and on
    random magnitudes and signs: numpy's bits."""
    rng = np.random.default_rng(3)
    b = rng.choice([-1, 1], 4000) * 10.0 ** rng.uniform(-8, 8, 4000)
    whole = rng.integers(-(2**40), 2**40, 4000).astype(float)
    a = whole * b
    a = np.concatenate([a, np.nextafter(a, np.inf), np.nextafter(a, -np.inf),
                        rng.standard_normal(4000) * 10.0 ** rng.uniform(-300, 300, 4000)])
    b = np.concatenate([b, b, b, rng.standard_normal(4000) * 10.0 ** rng.uniform(-10, 10, 4000)])
    keep = np.abs(a / b) < 2.0**52
    inputs = {"a": a[keep].copy(), "b": b[keep].copy()}
    ufunc = getattr(np, name)
    got = _compile(lambda t: {"out": ufunc(t["a"], t["b"])}, inputs)["out"]
    _same_bits(got, ufunc(inputs["a"], inputs["b"]))


@pytest.mark.parametrize("shape", [None, (200, 100, 1), (20, 10, 200)],
                         ids=["flat", "one-length", "grid"])
def test_threads_split_the_lengths_or_the_pairs_alike(monkeypatch, shape):
    """A block runs on several threads split along the lengths, or along the (batch,
    heads) pairs where it has one length (a flat list of rows included): the same bits as
    one thread."""
    def fn(t):
        return {"out": (t["a"] * 3 + t["b"]) / (t["c"] + 1.5) + (t["c"] // (t["a"] + 1)),
                "guarded": t["a"] >= 0}

    rng = np.random.default_rng(5)
    n = (20_000,) if shape is None else shape
    if shape is None:
        inputs = {k: rng.integers(0, 1000, n[0]) for k in "abc"}
        axes = None
    else:
        inputs = {"a": rng.integers(0, 1000, shape[0]), "b": rng.integers(0, 1000, shape[1]),
                  "c": rng.integers(0, 1000, shape[2])}
        axes = {"a": 0, "b": 1, "c": 2}
    sample = ({k: v[:8] for k, v in inputs.items()} if shape is None else
              {"a": inputs["a"][:3, None, None], "b": inputs["b"][None, :3, None],
               "c": inputs["c"][None, None, :3]})
    program = compiled.generate(compiled.trace(fn, sample), axes)
    got = {}
    for count in ("1", "2"):
        monkeypatch.setenv("PERFSIM_THREADS", count)
        got[count] = compiled.run(program, inputs, shape)
    for key in ("out", "guarded"):
        _same_bits(got["2"][key], got["1"][key])
    if shape is not None:
        full = {"a": inputs["a"][:, None, None], "b": inputs["b"][None, :, None],
                "c": inputs["c"][None, None, :]}
        _same_bits(got["1"]["out"], np.broadcast_to(fn(full)["out"], shape))
    else:
        _same_bits(got["1"]["out"], fn(inputs)["out"])


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("shape", [None, (200, 100, 1), (20, 10, 200)],
                         ids=["flat", "one-length", "grid"])
def test_run_writes_into_the_callers_arrays(monkeypatch, shape, threads):
    """``run(into=...)``: a float or boolean column of the caller's dtype is written into the
    caller's C-order array (directly where the kernel's order is C order, else each thread
    copies its lengths) and comes back as that array, with the bits of a run without
    ``into``; a column of another dtype is left out of it and returned as usual."""
    monkeypatch.setenv("PERFSIM_THREADS", threads)

    def fn(t):
        return {"out": (t["a"] * 3 + t["b"]) / (t["c"] + 1.5), "count": t["a"] * t["c"],
                "flag": t["b"] > 500}

    rng = np.random.default_rng(11)
    if shape is None:
        inputs = {k: rng.integers(0, 1000, 20_000) for k in "abc"}
        axes, sample, full = None, {k: v[:8] for k, v in inputs.items()}, (20_000,)
    else:
        inputs = {"a": rng.integers(0, 1000, shape[0]), "b": rng.integers(0, 1000, shape[1]),
                  "c": rng.integers(0, 1000, shape[2])}
        axes, full = {"a": 0, "b": 1, "c": 2}, shape
        sample = {"a": inputs["a"][:3, None, None], "b": inputs["b"][None, :3, None],
                  "c": inputs["c"][None, None, :3]}
    program = compiled.generate(compiled.trace(fn, sample), axes)
    plain = compiled.run(program, inputs, shape)
    into = {"out": np.full(full, -1.0), "flag": np.zeros(full, bool),
            "count": np.full(full, -1.0)}          # float64: the kernel's count is int64
    got = compiled.run(program, inputs, shape, into=into)
    assert got["out"] is into["out"] and got["flag"] is into["flag"]
    _same_bits(into["out"].reshape(-1), np.asarray(plain["out"]).reshape(-1))
    assert np.array_equal(into["flag"].reshape(-1), np.asarray(plain["flag"]).reshape(-1))
    assert (into["count"] == -1.0).all() and got["count"].dtype == np.int64
    _same_bits(np.asarray(got["count"]).reshape(-1), np.asarray(plain["count"]).reshape(-1))


def test_labels_come_back_as_codes_where_asked_per_row_or_constant():
    """``run(codes=...)``: a label column per row and a label the same on every row (a
    constant output) both as the caller's int8 codes, so a block's parts merge as numbers."""
    from perfsim.mathops import take

    def fn(t):
        return {"row": take(np.array(["a", "b", "c"]), (t["n"] > 1).astype(np.int64)),
                "same": "c", "other": "b"}

    inputs = {"n": np.array([0, 1, 2, 3], dtype=np.int64)}
    program = compiled.generate(compiled.trace(fn, inputs))
    assert program.plan["same"][0] == "const"
    plain = compiled.run(program, inputs)
    assert list(plain["row"]) == ["a", "a", "b", "b"] and plain["same"] == "c"
    coded = compiled.run(program, inputs, codes={"row": {"a": 4, "b": 5}, "same": {"c": 7}})
    assert coded["row"].dtype == np.int8 and list(coded["row"]) == [4, 4, 5, 5]
    assert coded["same"] == 7 and coded["same"].dtype == np.int8
    assert coded["other"] == "b"                    # not asked for: the label


def test_integer_power_is_refused():
    inputs = _pairs(np.array([1, 2, 3], dtype=np.int64))
    tr = compiled.trace(lambda t: {"out": t["a"] ** t["b"]}, inputs)
    with pytest.raises(compiled.Untraceable, match="power on integers"):
        compiled.generate(tr)


@pytest.mark.parametrize("name", ["ceil", "floor", "sqrt", "log2", "exp", "negative",
                                  "absolute", "isnan", "isinf", "isfinite", "trunc"])
def test_unary_ufuncs_match_numpy(name):
    ufunc = getattr(np, name)
    inputs = {"a": FLOATS.copy()}
    with np.errstate(all="ignore"):
        want = ufunc(inputs["a"])
        got = _compile(lambda t: {"out": ufunc(t["a"])}, inputs)["out"]
    assert compiled.same({"out": got}, {"out": want}) is None


def test_mixed_dtypes_casts_where_and_logic():
    inputs = {"n": INTS.copy(), "x": FLOATS[:len(INTS)].copy()}

    def fn(t):
        n, x = t["n"], t["x"]
        big = n > 2
        return {"mixed": n * 0.5 + x, "cast": (n // 3).astype(float),
                "pick": np.where(big & ~(x < 0), n, x), "clip": np.clip(n, 0, 5),
                "int_where": np.where(big, n, 0), "bool_out": np.logical_or(big, x > 1)}

    with np.errstate(all="ignore"):
        want = fn(inputs)
        got = _compile(fn, inputs)
    for key in want:
        _same_bits(got[key], want[key])


def test_argmax_of_a_stack_takes_the_first_maximum_and_nan():
    inputs = {"a": np.array([1.0, 5.0, np.nan, 2.0, 2.0]),
              "b": np.array([3.0, 5.0, 1.0, np.nan, 2.0]),
              "c": np.array([2.0, 1.0, 9.0, 9.0, 2.0])}

    def fn(t):
        return {"i": np.argmax(np.stack([t["a"], t["b"], t["c"]]), axis=0)}

    _same_bits(_compile(fn, inputs)["i"], fn(inputs)["i"])


def test_tables_labels_and_interp():
    inputs = {"k": np.array([0, 2, 1, 2, 0], dtype=np.int64),
              "x": np.array([-1.0, 0.0, 0.5, 3.0, 9.0])}
    names = ("hbm", "tensor", "mufu")

    def fn(t):
        return {"value": take([1.5, 2.5, 4.0], t["k"]), "label": take(names, t["k"]),
                "is_tensor": take(names, t["k"]) == "tensor",
                "curve": np.interp(t["x"], [0.0, 1.0, 3.0], [10.0, 20.0, 5.0]),
                "right": np.interp(t["x"], [0.0, 1.0], [0.0, 2.0], right=7.0)}

    got, want = _compile(fn, inputs), fn(inputs)
    for key in want:
        if key == "label":
            assert list(got[key]) == list(want[key])
        else:
            _same_bits(got[key], want[key])


def test_floor_sum_primitive_calls_its_scalar_twin():
    from perfsim.tiles import _floor_sum_array
    inputs = {"n": np.array([0, 1, 5, 100, 7], dtype=np.int64),
              "a": np.array([3, 0, 7, 13, 2], dtype=np.int64)}

    def fn(t):
        return {"s": _floor_sum_array(t["n"], 5, t["a"], 2)}

    _same_bits(_compile(fn, inputs)["s"], fn(inputs)["s"])


def test_guards_send_disagreeing_blocks_back():
    """A decision on row values holds for the rows the trace saw; a block where it fails is
    refused (None), not evaluated on the wrong branch."""
    def fn(t):
        n = t["n"]
        return {"out": n * 2 if (n > 0).all() else n * 3}

    tr = compiled.trace(fn, {"n": np.array([1, 2, 3], dtype=np.int64)})
    program = compiled.generate(tr)
    assert list(compiled.run(program, {"n": np.array([4, 5], dtype=np.int64)})["out"]) == [8, 10]
    assert compiled.run(program, {"n": np.array([4, -5], dtype=np.int64)}) is None


def test_a_decision_the_sampled_rows_disagree_on_is_untraceable():
    with pytest.raises(compiled.Untraceable, match="sampled rows differ"):
        compiled.trace(lambda t: {"out": t["n"] if (t["n"] > 1).any() else t["n"]},
                       {"n": np.array([1, 2, 3], dtype=np.int64)})


@pytest.mark.parametrize("fn, what", [
    (lambda t: {"out": t["n"] + np.array([1, 2, 3])}, "did not record"),
    (lambda t: {"out": t["n"].max()}, "max()"),
    (lambda t: {"out": t["n"][1:]}, "indexing"),
    (lambda t: {"out": np.asarray(t["n"]) + 0}, "numpy.asarray of a traced array"),
    (lambda t: {"out": t["n"] * int(np.asarray(t["n"]).sum())}, "numpy.asarray"),
    (lambda t: {"out": np.unique(t["n"])}, "numpy.unique"),
    (lambda t: {"out": np.add.reduce(t["n"])}, "reduce"),
])
def test_what_a_trace_refuses(fn, what):
    with pytest.raises(compiled.Untraceable, match=what.replace("(", r"\(").replace(")", r"\)")):
        compiled.trace(fn, {"n": np.array([1, 2, 3], dtype=np.int64)})


def test_shortcuts_take_the_general_path_when_traced():
    seen = []

    def fn(t):
        seen.append(shortcut_all(t["n"] > 0))
        return {"out": t["n"] + 1}

    compiled.trace(fn, {"n": np.array([1, 2, 3], dtype=np.int64)})
    assert seen == [False]
    assert shortcut_all(np.array([1, 2]) > 0) is True


def test_the_ir_holds_no_constant_values():
    """Two GPUs' numbers, one structure: one IR (compiled once), two constant vectors."""
    def fn_of(rate):
        return lambda t: {"out": t["n"] * rate + 3.0}

    n = {"n": np.array([1, 2, 3], dtype=np.int64)}
    first = compiled.generate(compiled.trace(fn_of(2.0), n))
    second = compiled.generate(compiled.trace(fn_of(5.0), n))
    assert first.key == second.key
    assert list(compiled.run(second, n)["out"]) == [8.0, 13.0, 18.0]


# --------------------------------------------------------------------------- sweeps


def _frames_equal(a, b):
    assert list(a.columns) == list(b.columns)
    assert len(a) == len(b)
    for column in a.columns:
        x, y = a[column], b[column]
        if x.dtype.kind == "f":
            xs, ys = x.to_numpy(), y.to_numpy()
            assert np.array_equal(np.isnan(xs), np.isnan(ys)), column
            scale = np.maximum(np.abs(xs), np.finfo(float).tiny)
            diff = np.where(np.isnan(xs), 0.0, np.abs(xs - ys) / scale)
            assert diff.max(initial=0.0) <= 1e-12, (column, diff.max())
        else:
            assert x.equals(y), column


GRID = dict(batch=[1, 3, 8], heads=[8, 32], seqlen_q=[128, 1000, 4096, 8192],
            head_dim=[64, 128], causal=[False, True])
ALGORITHMS = ["standard", "fa1", "fa2", "fa3", "fa4", *implementations()]


#: In the fast set; the rest of the algorithm x phase matrix is marked slow.
FAST_CASES = {("fa2", "fwd"), ("fa3", "fwd_bwd"), ("eager", "fwd"), ("flash-attn-cute", "fwd"),
              ("fa4", "bwd"), ("sdpa-cudnn", "fwd")}


@pytest.mark.parametrize("algorithm, phase", [
    pytest.param(a, p, marks=() if (a, p) in FAST_CASES else pytest.mark.slow)
    for a in ALGORITHMS for p in ("fwd", "bwd", "fwd_bwd")])
def test_compiled_sweep_rows_equal_numpy(algorithm, phase):
    gpu = "b200" if algorithm == "fa4" else "h100-sxm5"
    kwargs = dict(GRID, gpus=gpu, algorithms=algorithm, phase=phase)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)   # a disagreeing kernel fails here
        _frames_equal(perfsim.sweep(**kwargs, engine="compiled"),
                      perfsim.sweep(**kwargs, engine="numpy"))


@pytest.mark.parametrize("kwargs", [
    dict(batch=[1, 4], heads=[32], kv_heads=[4], seqlen_q=[1], seqlen_k=[4096, 65536],
         head_dim=128, algorithms=["fa2", "fa3", "sdpa-cudnn", "flash-attn-cute"],
         gpus=["h100-sxm5", "h200-sxm"]),
    dict(batch=[2], heads=[16], seqlen_q=[2048, 8192], head_dim=[128], causal=[True],
         window=[(256, 0), (1024, 1024)], algorithms=["fa2", "fa3"], gpus="h100-sxm5"),
    dict(batch=[1, 2], heads=[8], seqlen_q=[4096], head_dim=[64, 256], dtype=["fp16"],
         dropout_p=[0.0, 0.1], softcap=[0.0, 30.0], algorithms=["fa2"],
         gpus=["a100-sxm4-80gb", "rtx-4090"]),
    dict(batch=[1, 2, 4], heads=[16], seqlen_q=[1024, 16384], head_dim=[128],
         algorithms=["fa2", "fa3"], gpus="h100-sxm5",
         overrides={"hbm_bandwidth_bytes_per_s": {"scale": [0.5, 2.0]},
                    "sm_count": [66, 132]}),
    dict(batch=[1, 8], heads=[8, 64], seqlen_q=[4096], head_dim=[128], phase="fwd_bwd",
         algorithms=["fa2", "fa3"], gpus="h100-sxm5", timing={"clock": "boost"}),
], ids=["gqa-decode", "window", "dtype-dropout-softcap", "what-ifs", "boost-clock"])
def test_compiled_sweep_rows_equal_numpy_beyond_dense(kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        _frames_equal(perfsim.sweep(**kwargs, engine="compiled"),
                      perfsim.sweep(**kwargs, engine="numpy"))


def test_the_compiled_path_runs_and_frames_stream_alike():
    before = compiled.STATS["rows"]
    kwargs = dict(batch=list(range(1, 9)), heads=[16, 32], seqlen_q=[512, 2048, 8192],
                  head_dim=128, causal=True, gpus="h100-sxm5", algorithms="fa2")
    rows = perfsim.sweep(**kwargs, engine="compiled")
    assert compiled.STATS["rows"] - before >= len(rows) // 2
    import pandas as pd
    streamed = pd.concat(list(perfsim.sweep_frames(**kwargs, engine="compiled")),
                         ignore_index=True)
    for column in ("seconds", "clock_hz", "hbm_bytes"):
        assert np.array_equal(streamed[column].to_numpy(), rows[column].to_numpy())


def test_a_compiled_sweep_writes_its_columns_into_the_result_in_place(monkeypatch):
    """``sweep`` hands each block's rows of its result table to the kernel
    (``_Table.destination``), which writes its float columns there; ``_Table.add`` then finds
    them in place and copies nothing, and the rows are numpy's (several threads and blocks:
    each thread's lengths land in their own rows)."""
    sweep_module = __import__("perfsim.sweep", fromlist=["_same_array"])
    found = []
    same = sweep_module._same_array

    def spy(a, b):
        found.append(same(a, b))
        return found[-1]

    monkeypatch.setattr(sweep_module, "_same_array", spy)
    monkeypatch.setenv("PERFSIM_THREADS", "2")
    # two blocks (39 and 1 batch values), the first 31 980 rows on two threads; no row splits
    kwargs = dict(batch=list(range(8, 48)), heads=[32, 64], seqlen_q=list(range(64, 26304, 64)),
                  head_dim=128, causal=True, gpus="h100-sxm5", algorithms="fa2")
    rows = perfsim.sweep(**kwargs, engine="compiled")
    assert sum(found) >= 2 * 10        # the float columns of both blocks (counts are int64)
    found.clear()
    _frames_equal(rows, perfsim.sweep(**kwargs, engine="numpy"))
    assert not any(found)           # numpy's rows are copied as before


def test_a_stream_inside_a_sweeps_callback_writes_its_own_arrays():
    """A reviewer's case: a stream evaluated inside another sweep's progress callback took
    that sweep's table as its destination, failed on its rows (a false "please report this"
    warning) and dropped the structure's kernel for the rest of the process. Each sweep now
    hands its own table to its own blocks only."""
    kwargs = dict(batch=[1, 2, 3], heads=[8], seqlen_q=[512, 1024, 2048], head_dim=128,
                  gpus="h100-sxm5", algorithms="fa2")
    streamed = []

    def progress(done, total):
        streamed.append(pd.concat(list(perfsim.sweep_frames(engine="compiled", **kwargs)),
                                  ignore_index=True))

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        outer = perfsim.sweep(engine="compiled", progress=progress, **{**kwargs, "batch": [1]})
        before = compiled.STATS["rows"]
        again = perfsim.sweep(engine="compiled", **kwargs)
    assert compiled.STATS["rows"] - before == len(again)        # still compiled
    numpy_rows = perfsim.sweep(engine="numpy", **kwargs)
    _frames_equal(again, numpy_rows)
    for key in ("seconds", "clock_hz"):
        assert np.allclose(streamed[0][key].to_numpy(), numpy_rows[key].to_numpy(),
                           rtol=1e-12, atol=0)
    _frames_equal(outer, perfsim.sweep(engine="numpy", **{**kwargs, "batch": [1]}))


def test_a_disagreeing_kernel_is_dropped_with_a_warning(monkeypatch):
    import importlib

    from perfsim import sweep as sweep_module  # noqa: F401 - the module, for its caches
    module = importlib.import_module("perfsim.sweep")
    monkeypatch.setattr(module, "_PROGRAMS", {})
    monkeypatch.setattr(compiled, "same", lambda got, ref, rtol=0: "seconds: made up")
    kwargs = dict(batch=[1, 2], heads=[8], seqlen_q=[256, 1024], head_dim=64,
                  gpus="h100-sxm5", algorithms="fa2")
    with pytest.warns(RuntimeWarning, match="disagrees with numpy") as caught:
        rows = perfsim.sweep(**kwargs, engine="compiled")
    _frames_equal(rows, perfsim.sweep(**kwargs, engine="numpy"))
    # the warning names the caller's line, not a line inside perfsim (it named sweep.py)
    assert {Path(w.filename).name for w in caught} == {Path(__file__).name}


def test_engine_is_checked():
    with pytest.raises(PerfsimError, match="engine: 'fast' is not one of auto, numpy, compiled"):
        perfsim.sweep(batch=1, heads=1, seqlen_q=128, head_dim=64, engine="fast")


def test_the_cli_names_the_same_engines():
    from perfsim.cli import build_parser
    from perfsim.sweep import ENGINES
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices["sweep"]
    engine = next(a for a in sub._actions if a.dest == "engine")
    assert tuple(engine.choices) == ENGINES


@pytest.mark.parametrize("value", ["0", "-1", "abc", "1.5"])
def test_a_bad_thread_count_is_refused_before_any_work(monkeypatch, value):
    monkeypatch.setenv("PERFSIM_THREADS", value)
    with pytest.raises(PerfsimError, match="PERFSIM_THREADS"):
        perfsim.sweep(batch=1, heads=1, seqlen_q=128, head_dim=64, gpus="h100-sxm5",
                      algorithms="fa2", engine="compiled")
    monkeypatch.setenv("PERFSIM_THREADS", "1")
    assert compiled.threads() == 1


@pytest.mark.parametrize("name", ["ceil", "floor", "trunc", "rint"])
def test_rounding_an_integer_or_boolean_gives_numpys_value_and_dtype(name):
    """numpy >= 2.3 rounds an integer to itself in its own dtype (before: to float64)."""
    ufunc = getattr(np, name)
    inputs = {"n": INTS.copy(), "b": INTS > 0}
    want = {"n": ufunc(inputs["n"]), "b": ufunc(inputs["n"] > 0)}
    if want["b"].dtype not in (np.dtype(bool), np.dtype(np.float64)):
        want.pop("b")                       # a float16 result is refused (next test)
    got = _compile(lambda t: {k: ufunc(t["n"] if k == "n" else t["n"] > 0) for k in want},
                   inputs)
    for key in want:
        assert np.asarray(got[key]).dtype == want[key].dtype
        _same_bits(got[key], want[key])


@pytest.mark.parametrize("fn", [
    lambda t: {"out": t["n"].astype(np.int32) + 1},
    lambda t: {"out": t["x"].astype(np.float32) * 3},
    lambda t: {"out": np.sqrt(t["n"] > 1)},          # float16
    lambda t: {"out": t["n"].astype(np.uint64) // 3},
])
def test_narrow_and_unsigned_dtypes_are_refused(fn):
    """The kernels compute in int64, float64 and bool: numpy's narrower types wrap and round
    differently, so a trace that meets one leaves its group to numpy."""
    with pytest.raises(compiled.Untraceable, match="dtype"):
        compiled.trace(fn, {"n": np.array([1, 2, 3], dtype=np.int64),
                            "x": np.array([0.5, 1.5, 2.5])})


def test_an_empty_block_gives_empty_columns():
    tr = compiled.trace(lambda t: {"out": t["n"] * 2}, {"n": np.array([1, 2], dtype=np.int64)})
    got = compiled.run(compiled.generate(tr), {"n": np.zeros(0, dtype=np.int64)})
    assert got["out"].shape == (0,)


@pytest.mark.parametrize("signal_exc", ["KeyboardInterrupt", "_Terminated"])
def test_an_interrupt_waits_for_the_kernel_threads(monkeypatch, signal_exc):
    """Ctrl-C (or the CLI's SIGTERM exception) in the middle of a threaded block: ``run``
    returns (raises) only after every thread has finished writing into the block's arrays
    (before, they were freed under the threads and the process could crash; SIGTERM's
    exception escaped the wait until 2026-12-04)."""
    import concurrent.futures

    from perfsim import cli
    second = KeyboardInterrupt if signal_exc == "KeyboardInterrupt" else cli._Terminated
    import time

    tr = compiled.trace(lambda t: {"out": t["n"] * 2},
                        {"n": np.array([1, 2], dtype=np.int64)})
    program = compiled.generate(tr)
    n = np.arange(1 << 16, dtype=np.int64)
    monkeypatch.setenv("PERFSIM_THREADS", "2")
    finished = []
    real = compiled.kernel_of(program)

    def slow(*args):
        time.sleep(0.2)
        real(*args)
        finished.append(args[1])

    monkeypatch.setattr(compiled, "kernel_of", lambda p: slow)
    calls = []
    real_result = concurrent.futures.Future.result

    def interrupted(self, timeout=None):
        if not calls:
            calls.append(1)
            raise KeyboardInterrupt
        return real_result(self, timeout)

    monkeypatch.setattr(concurrent.futures.Future, "result", interrupted)
    real_wait = concurrent.futures.wait
    waits = []

    def wait_interrupted(futures):          # a second signal while waiting
        if not waits:
            waits.append(1)
            raise second
        return real_wait(futures)

    monkeypatch.setattr(concurrent.futures, "wait", wait_interrupted)
    with pytest.raises(second):
        compiled.run(program, {"n": n})
    assert waits and len(finished) == 2     # both threads done when the interrupt surfaced


def test_auto_leaves_small_groups_and_a_bad_thread_count_alone(monkeypatch):
    """``engine="auto"`` compiles neither a small sweep nor one of many small groups, and
    reads PERFSIM_THREADS only when it compiles."""
    import importlib
    sweep_module = importlib.import_module("perfsim.sweep")   # perfsim.sweep: the function
    monkeypatch.setenv("PERFSIM_THREADS", "abc")
    before = compiled.STATS["rows"]
    kwargs = dict(batch=[1, 2], heads=[8], seqlen_q=[256, 1024], head_dim=64,
                  gpus="h100-sxm5", algorithms="fa2")
    perfsim.sweep(**kwargs)                                  # auto, 4 rows: numpy
    monkeypatch.setattr(sweep_module, "AUTO_MIN_ROWS", 1)
    perfsim.sweep(**kwargs)                                  # groups under 2^21 rows: numpy
    assert compiled.STATS["rows"] == before
    monkeypatch.setattr(sweep_module, "AUTO_MIN_GROUP_ROWS", 1)
    monkeypatch.setattr(sweep_module, "_PROGRAMS", {})
    with pytest.raises(PerfsimError, match="PERFSIM_THREADS"):
        perfsim.sweep(**kwargs)                              # compiles: the error now


def test_an_emitter_failure_is_a_warning_and_numpy_rows(monkeypatch):
    import importlib
    sweep_module = importlib.import_module("perfsim.sweep")   # perfsim.sweep: the function
    monkeypatch.setattr(sweep_module, "_PROGRAMS", {})

    def broken(*args, **kwargs):
        raise TypeError("made up")

    monkeypatch.setattr(compiled, "generate", broken)
    kwargs = dict(batch=[1, 2], heads=[8], seqlen_q=[256, 1024], head_dim=64,
                  gpus="h100-sxm5", algorithms="fa2")
    with pytest.warns(RuntimeWarning, match="failed .TypeError: made up"):
        rows = perfsim.sweep(**kwargs, engine="compiled")
    _frames_equal(rows, perfsim.sweep(**kwargs, engine="numpy"))


def test_without_numba_the_error_names_both_spellings_of_numpy(monkeypatch):
    monkeypatch.setattr(compiled, "available", lambda: False)
    with pytest.raises(PerfsimError, match="--engine numpy"):
        perfsim.sweep(batch=1, heads=1, seqlen_q=128, head_dim=64, engine="compiled")


def test_more_customers_than_the_trace_saw_go_to_numpy():
    """A what-if GPU whose SMs hold thousands of CTAs gives flash-attn 2's closed cycle more
    than 2^8 customers at a large batch: a structure traced at small batches reads 8 bits of
    the count, and a later block with more fails that guard (numpy's rows, not ``inf``)."""
    gpu = perfsim.load_gpu("h100-sxm5").model_copy(update=dict(
        max_ctas_per_sm=4096, max_warps_per_sm=4096, max_threads_per_sm=2**17,
        registers_per_sm=2**24, smem_bytes_per_sm=2**30, id="crowded"))
    kw = dict(heads=[64], seqlen_q=[4096], head_dim=64, gpus=[gpu], algorithms="fa2")
    perfsim.sweep(batch=[1, 2], engine="compiled", **kw)          # traced: few customers
    failures = compiled.STATS["guard_failures"]
    got = perfsim.sweep(batch=[1, 64], engine="compiled", **kw)
    want = perfsim.sweep(batch=[1, 64], engine="numpy", **kw)
    assert compiled.STATS["guard_failures"] > failures
    assert np.isfinite(got["seconds"]).all()
    assert np.allclose(got["seconds"], want["seconds"], rtol=1e-12, atol=0)
    assert list(got["bound"]) == list(want["bound"])


def _cache_kernel():
    """A small traced structure's program (its IR and thus its cache file its own)."""
    def fn(t):
        return {"y": t["a"] * 3 + t["b"] // 2 - 7}
    inputs = {"a": np.arange(64, dtype=np.int64), "b": np.arange(64, dtype=np.int64) * 5}
    return compiled.generate(compiled.trace(fn, inputs)), inputs


def test_kernels_are_kept_on_disk_and_loaded_by_a_later_process(monkeypatch, tmp_path):
    """A kernel's machine code goes to ``PERFSIM_CACHE_DIR``; a process that has not
    compiled it (here: the in-process table emptied) loads it from there and computes the
    same; a file that fails its check is compiled again and replaced; an empty
    ``PERFSIM_CACHE_DIR`` keeps nothing."""
    monkeypatch.setenv("PERFSIM_CACHE_DIR", str(tmp_path / "kernels"))
    monkeypatch.setattr(compiled, "_COMPILED", {})
    program, inputs = _cache_kernel()
    before = dict(compiled.CACHE_STATS)
    want = compiled.run(program, inputs)["y"]
    files = list((tmp_path / "kernels").glob("*.o"))
    assert len(files) == 1 and compiled.CACHE_STATS["written"] == before["written"] + 1
    monkeypatch.setattr(compiled, "_COMPILED", {})          # a new process, as far as it knows
    assert np.array_equal(compiled.run(program, inputs)["y"], want)
    assert compiled.CACHE_STATS["loaded"] == before["loaded"] + 1
    # a damaged file: ignored, compiled again, written over
    files[0].write_bytes(files[0].read_bytes()[:-10] + b"0123456789")
    monkeypatch.setattr(compiled, "_COMPILED", {})
    assert np.array_equal(compiled.run(program, inputs)["y"], want)
    assert compiled.CACHE_STATS["loaded"] == before["loaded"] + 1
    assert compiled.CACHE_STATS["written"] == before["written"] + 2
    monkeypatch.setattr(compiled, "_COMPILED", {})
    assert np.array_equal(compiled.run(program, inputs)["y"], want)
    assert compiled.CACHE_STATS["loaded"] == before["loaded"] + 2    # the rewritten file
    # no cache
    monkeypatch.setenv("PERFSIM_CACHE_DIR", "")
    monkeypatch.setattr(compiled, "_COMPILED", {})
    assert compiled.kernel_cache_dir() is None
    assert np.array_equal(compiled.run(program, inputs)["y"], want)
    assert compiled.CACHE_STATS["written"] == before["written"] + 2


def test_the_kernel_cache_is_held_under_its_size_limit(monkeypatch, tmp_path):
    """Past ``PERFSIM_CACHE_MAX_BYTES``, a write removes the kernels used longest ago (a load
    touches its file) and keeps the one written; a stale temporary file goes, a fresh one
    stays; a limit that is not a whole number warns and keeps the default."""
    import os
    import time
    folder = tmp_path / "kernels"
    folder.mkdir()
    old = time.time() - 7200
    for i, name in enumerate(("a.o", "b.o", "c.o")):
        (folder / name).write_bytes(b"x" * 1000)
        os.utime(folder / name, (old + i, old + i))
    (folder / ".a.o.1.2.tmp").write_bytes(b"half")
    os.utime(folder / ".a.o.1.2.tmp", (old, old))
    (folder / ".b.o.3.4.tmp").write_bytes(b"half")                # a write under way
    monkeypatch.setenv("PERFSIM_CACHE_DIR", str(folder))
    monkeypatch.setattr(compiled, "_COMPILED", {})
    program, inputs = _cache_kernel()
    compiled.run(program, inputs)                                 # default limit: all stay
    written = [p for p in folder.glob("*.o") if p.name not in ("a.o", "b.o", "c.o")]
    assert len(written) == 1
    assert {p.name for p in folder.iterdir()} == {"a.o", "b.o", "c.o", written[0].name,
                                                   ".b.o.3.4.tmp"}
    size = written[0].stat().st_size
    monkeypatch.setenv("PERFSIM_CACHE_MAX_BYTES", str(size + 1500))
    os.utime(folder / "a.o")                                      # a.o used just now
    written[0].unlink()
    monkeypatch.setattr(compiled, "_COMPILED", {})
    compiled.run(program, inputs)
    assert {p.name for p in folder.glob("*.o")} == {"a.o", written[0].name}
    monkeypatch.setenv("PERFSIM_CACHE_MAX_BYTES", "0")            # only the new kernel stays
    written[0].unlink()
    monkeypatch.setattr(compiled, "_COMPILED", {})
    compiled.run(program, inputs)
    assert {p.name for p in folder.glob("*.o")} == {written[0].name}
    monkeypatch.setenv("PERFSIM_CACHE_MAX_BYTES", "lots")
    with pytest.warns(RuntimeWarning, match="PERFSIM_CACHE_MAX_BYTES='lots'"):
        assert compiled.cache_max_bytes() == compiled.CACHE_MAX_BYTES


def test_a_cache_that_cannot_be_written_only_costs_the_compile(monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("PERFSIM_CACHE_DIR", str(blocker / "kernels"))
    monkeypatch.setattr(compiled, "_COMPILED", {})
    program, inputs = _cache_kernel()
    assert np.array_equal(compiled.run(program, inputs)["y"],
                          inputs["a"] * 3 + inputs["b"] // 2 - 7)
    assert blocker.read_text() == "not a folder"


def test_a_cache_file_is_loaded_for_its_own_kernel_alone(monkeypatch, tmp_path):
    """Another kernel's valid file renamed onto this kernel's name is not loaded (its
    identity is stored in it): this kernel compiles and computes its own values."""
    monkeypatch.setenv("PERFSIM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compiled, "_COMPILED", {})
    program, inputs = _cache_kernel()

    def other(t):
        return {"y": t["a"] - t["b"]}
    other_program = compiled.generate(compiled.trace(other, inputs))
    compiled.run(other_program, inputs)
    (other_file,) = tmp_path.glob("*.o")
    compiled.run(program, inputs)
    (own_file,) = set(tmp_path.glob("*.o")) - {other_file}
    own_file.write_bytes(other_file.read_bytes())
    monkeypatch.setattr(compiled, "_COMPILED", {})
    loaded = compiled.CACHE_STATS["loaded"]
    assert np.array_equal(compiled.run(program, inputs)["y"],
                          inputs["a"] * 3 + inputs["b"] // 2 - 7)
    assert compiled.CACHE_STATS["loaded"] == loaded


@pytest.mark.parametrize("folder", ["~no-such-user-perfsim/kernels", "fifo"])
def test_a_cache_folder_that_cannot_be_used_leaves_the_kernels_compiled(monkeypatch, tmp_path,
                                                                        folder):
    """No home to expand (an unknown ``~user``; a container without a passwd entry) or a
    FIFO where a kernel's file would be: the kernel compiles as without a cache (no
    fallback to numpy, no read that blocks)."""
    import os

    monkeypatch.setattr(compiled, "_COMPILED", {})
    program, inputs = _cache_kernel()
    if folder == "fifo":
        if not hasattr(os, "mkfifo"):
            pytest.skip("needs mkfifo")
        monkeypatch.setenv("PERFSIM_CACHE_DIR", str(tmp_path))
        compiled.kernel_of(program)                       # (sets the target, names the file)
        path, _ = compiled._cache_entry(program.key, True)
        path.unlink()
        os.mkfifo(path)
        monkeypatch.setattr(compiled, "_COMPILED", {})
    else:
        monkeypatch.setenv("PERFSIM_CACHE_DIR", folder)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.array_equal(compiled.run(program, inputs)["y"],
                              inputs["a"] * 3 + inputs["b"] // 2 - 7)
