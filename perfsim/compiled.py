"""Compiled sweep evaluation: the model's own array code, traced once and compiled to a loop.

A sweep evaluates a block of rows by running the model's numpy code on arrays
(``perfsim.sweep``). Inside one group (GPU, algorithm, timing, scalar fields) and one kernel
structure, that code is a straight line of elementwise operations: every Python-level choice
it makes depends on the group, not on the rows. This module records that line once and turns
it into one native loop over the rows, so each formula stays written once — in the model —
and the fused loop is generated from it, never kept by hand.

**Tracing.** :func:`trace` runs a function on :class:`TracedArray` inputs: an ndarray
subclass holding a small sample of real rows, whose ufuncs and the numpy functions listed in
:data:`_FUNCTIONS` compute their values *and* record a node (operation, operands, dtype) in a
:class:`Graph`. What cannot be recorded raises :class:`Untraceable`, and the caller falls
back to numpy:

- a plain ndarray of more than one element meeting a traced one (its values came from the
  rows by a path the trace did not see: ``np.asarray`` drops the subclass, so the model uses
  ``perfsim.mathops.asarray``), reductions over rows (``max``, ``sum``), indexing, item
  assignment, ufunc methods (``reduce``);
- a decision on the rows' values — ``bool()``, ``int()``, ``.any()``, ``np.all()`` of a
  traced array — is recorded as a **guard**: the sampled rows must agree on it (else
  :class:`Untraceable`), and the compiled loop checks every row against the sampled value;
  a block with one row that disagrees is evaluated by numpy.

Loops whose trip count depends on the values (the floor-sum reduction of
``perfsim.tiles``) are *primitives* (:func:`perfsim.mathops.elementwise`): the array
function names its scalar twin, which the kernel calls (compiled as it is).

**Code generation** (:func:`generate`). One LLVM IR function (llvmlite, numba's backend)
of two nested loops — over a block's sequence lengths, and inside, vectorised by LLVM, over
its (batch, heads) pairs — with each node emitted in the outer loop where its inputs allow:
what depends on the sequence lengths alone (tile counts, floor sums) is computed once per
length, as numpy's broadcasting does. Every number the trace met (GPU rates, tile sizes,
timing parameters, tables) is read from two constant vectors (float64 and int64) rather
than written into the IR, so the IR — and the machine code — depends only on the structure
of the computation: GPUs, head dims and what-ifs that take the same branches share one kernel
(:func:`_signature`). Each node computes in the dtype numpy gave it; ``maximum`` /
``minimum`` propagate NaN as numpy's do, ``floor_divide`` / ``remainder`` follow numpy on
negative and zero divisors (integers: 0; floats: ``npy_divmod``), ``argmax`` takes the first
maximum (NaN first), ``interp`` is numpy's ``arr_interp``. A primitive calls its scalar
twin compiled by numba (``numba.cfunc``).

numba's own front end was tried first: it took 8-200 s to compile one structure of
~1 200 statements on the 2-core development machine; LLVM from IR takes 0.2-0.5 s per
structure (plus ~0.6 s once per process for numba's primitives, which numba caches on disk).
The machine code LLVM makes for a structure is kept on disk too (:func:`kernel_cache_dir`,
``PERFSIM_CACHE_DIR``), keyed by the IR, this CPU and the llvmlite version: a later process
loads it instead of optimising and compiling again. The folder is held under 256 MiB
(``PERFSIM_CACHE_MAX_BYTES``) by removing the kernels used longest ago.

**Checks.** A new kernel is compared with numpy on parts of the first block it runs on (a
sub-grid of its axes, or two samples of its rows; relative 1e-12, exact for integers and
labels, NaN where numpy has NaN); a kernel that disagrees, or that fails to compile, is not
used (a ``RuntimeWarning`` names it) and its group runs on numpy. ``tests/test_compiled.py``
checks the operations against numpy and whole sweeps of every algorithm.

Results can differ from numpy's in the last bit where LLVM's ``pow`` / ``log2`` calls differ
from numpy's loops; the checks hold them to 1e-12.

Length: the tracer, the IR emitter and the runner are one mechanism — a node the tracer
records is one the emitter must know, with numpy's semantics — and none is used elsewhere.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import importlib.util
import math
import os
import re
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from perfsim.errors import outside_perfsim

#: Rows of the sample a structure is traced on (spread over the block).
SAMPLE_ROWS = 48
#: Relative tolerance of the check of a new kernel against numpy.
CHECK_RTOL = 1e-12


class Untraceable(Exception):
    """The traced function did something :func:`trace` cannot record (the message says what);
    its rows are evaluated by numpy."""


class Const:
    """A number the trace met as an operand (not a row value)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return f"Const({self.value!r})"


_TRACED_DTYPES = frozenset({np.dtype(np.int64), np.dtype(np.float64), np.dtype(np.bool_)})


class Graph:
    """Recorded nodes ``(op, operands, dtype)`` in execution order (an operand is a node
    index or a :class:`Const`) and guards ``(node, value)``: every row must give ``value``."""

    def __init__(self):
        self.nodes: list[tuple] = []
        self.guards: list[tuple[int, object]] = []

    def add(self, op: tuple, operands, dtype) -> int:
        """Record a node; returns its index.

        Raises:
            Untraceable: a value of a dtype other than int64, float64, bool or a label
                string (the kernels compute in those three; numpy's narrower types wrap
                and round differently)."""
        dtype = np.dtype(dtype)
        if dtype not in _TRACED_DTYPES and dtype.kind != "U":
            raise Untraceable(f"a value of dtype {dtype} (the compiled engine computes in "
                              "int64, float64 and bool)")
        self.nodes.append((op, tuple(operands), dtype))
        return len(self.nodes) - 1


_ACTIVE = threading.local()
_TRACE_LOCK = threading.Lock()


def _graph() -> Graph:
    graph = getattr(_ACTIVE, "graph", None)
    if graph is None:
        raise Untraceable("a traced array used outside its trace")
    return graph


def _plain(x):
    return x.view(np.ndarray) if isinstance(x, TracedArray) else x


def _operand(x):
    """``(node or Const, plain value)`` of one operand."""
    if isinstance(x, TracedArray):
        return x._node, x.view(np.ndarray)
    if isinstance(x, np.ndarray):
        if x.size != 1 or x.dtype.kind not in "biuf":
            raise Untraceable(f"an array of shape {x.shape} ({x.dtype}) that the trace did not "
                              "record meets a traced one")
        return Const(x.reshape(()).item()), x
    if isinstance(x, (bool, int, float, np.bool_, np.integer, np.floating)):
        value = x.item() if isinstance(x, np.generic) else x
        if isinstance(value, int) and not isinstance(value, bool) and not (
                -2 ** 63 <= value < 2 ** 63):
            raise Untraceable(f"the integer {value} does not fit in int64")
        return Const(value), x
    raise Untraceable(f"an operand of type {type(x).__name__}")


def _wrap(values, node: int) -> TracedArray:
    out = np.asarray(values).view(TracedArray)
    out._node = node
    return out


def _guard(x: TracedArray, what: str):
    """The one value every sampled row of ``x`` has, recorded as a guard."""
    flat = x.view(np.ndarray).ravel()
    if flat.size == 0 or not (flat == flat[0]).all():
        raise Untraceable(f"{what} of a traced array whose sampled rows differ")
    value = flat[0].item()
    _graph().guards.append((x._node, value))
    return value


def _refuse(what: str):
    def method(self, *args, **kwargs):
        raise Untraceable(f"{what} of a traced array")
    return method


class TracedArray(np.ndarray):
    """A sample of row values that records what is computed from it (:func:`trace`)."""

    _node: int | None = None
    #: ``perfsim.mathops.shortcut_all`` answers False: the recorded code takes the general
    #: path, which holds for any rows.
    _perfsim_general_path = True

    def __array_finalize__(self, obj):
        self._node = getattr(obj, "_node", None)

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        if method != "__call__":
            raise Untraceable(f"numpy.{ufunc.__name__}.{method}")
        if ufunc.__name__ not in UFUNCS:
            raise Untraceable(f"numpy.{ufunc.__name__}")
        if set(kwargs) - {"dtype", "casting"} or ufunc.nout != 1:
            raise Untraceable(f"numpy.{ufunc.__name__} with {sorted(kwargs)}")
        label = _label_compare(ufunc, inputs)
        if label is not None:
            return label
        operands, values = zip(*(_operand(x) for x in inputs))
        result = np.asarray(ufunc(*values, **kwargs))
        node = _graph().add(("ufunc", ufunc.__name__), operands, result.dtype)
        if out is None:
            return _wrap(result, node)
        (target,) = out
        if not isinstance(target, TracedArray):
            raise Untraceable(f"numpy.{ufunc.__name__} into an untraced array")
        np.copyto(target.view(np.ndarray), result, casting="unsafe")
        target._node = _graph().add(("cast",), (node,), target.dtype)
        return target

    def __array_function__(self, func, types, args, kwargs):
        handler = _FUNCTIONS.get(func.__name__)
        if handler is None:
            raise Untraceable(f"numpy.{func.__name__}")
        return handler(*args, **kwargs)

    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
        """A recorded conversion (numpy's ``astype``)."""
        result = self.view(np.ndarray).astype(dtype)
        return _wrap(result, _graph().add(("cast",), (self._node,), result.dtype))

    def copy(self, order="C"):
        """The same node (a copy has the same values)."""
        return _wrap(self.view(np.ndarray).copy(), self._node)

    def reshape(self, *shape, **kwargs):
        """The same node in another shape (nodes are elementwise)."""
        return _wrap(self.view(np.ndarray).reshape(*shape, **kwargs), self._node)

    def ravel(self, order="C"):
        """The same node, flat."""
        return _wrap(self.view(np.ndarray).ravel(), self._node)

    def __bool__(self):
        return bool(_guard(self.astype(bool), "bool()"))

    def __int__(self):
        return int(_guard(self, "int()"))

    def __index__(self):
        return int(_guard(self, "an index"))

    def __float__(self):
        return float(_guard(self, "float()"))

    def item(self, *args):
        """The one sampled value, recorded as a guard."""
        if args:
            raise Untraceable("item(i) of a traced array")
        return _guard(self, "item()")

    def any(self, axis=None, out=None, keepdims=False, **kwargs):
        """The sampled rows' common truth value, recorded as a guard."""
        if axis is not None or out is not None or keepdims or kwargs:
            raise Untraceable("any(axis) of a traced array")
        return np.bool_(_guard(self.astype(bool), "any()"))

    def all(self, axis=None, out=None, keepdims=False, **kwargs):
        """The sampled rows' common truth value, recorded as a guard."""
        if axis is not None or out is not None or keepdims or kwargs:
            raise Untraceable("all(axis) of a traced array")
        return np.bool_(_guard(self.astype(bool), "all()"))

    def argmax(self, axis=None, out=None, **kwargs):
        """A recorded argmax over a stack's first axis."""
        return _argmax(self, axis, out, **kwargs)

    def __getitem__(self, key):
        if key is Ellipsis or key == ():
            return self
        raise Untraceable(f"indexing a traced array with {key!r}")

    def __setitem__(self, key, value):
        if key is Ellipsis and isinstance(value, TracedArray):
            np.copyto(self.view(np.ndarray), value.view(np.ndarray), casting="unsafe")
            self._node = _graph().add(("cast",), (value._node,), self.dtype)
            return
        raise Untraceable(f"assigning to a traced array at {key!r}")

    @property
    def flat(self):
        """Refused: a flat iterator reads sampled values."""
        raise Untraceable("the .flat of a traced array")

    def __iter__(self):
        raise Untraceable("iterating over a traced array")

    max = _refuse("max()")
    min = _refuse("min()")
    sum = _refuse("sum()")
    prod = _refuse("prod()")
    mean = _refuse("mean()")
    tolist = _refuse("tolist()")

    @staticmethod
    def _perfsim_take(table, index):
        """``table[index]`` for a constant table (``perfsim.mathops.take``)."""
        table = np.asarray(table)
        if table.ndim != 1 or table.dtype.kind not in "biufU":
            raise Untraceable(f"reading a table of shape {table.shape} ({table.dtype})")
        result = table[index.view(np.ndarray)]
        return _wrap(result, _graph().add(("take", tuple(table.tolist())), (index._node,),
                                          result.dtype))

    @staticmethod
    def _perfsim_call(array_fn, scalar_fn, args):
        """``array_fn(*args)`` recorded as one node that calls ``scalar_fn`` per row
        (``perfsim.mathops.elementwise``)."""
        operands, values = zip(*(_operand(x) for x in args))
        result = np.asarray(array_fn(*values))
        # by module and qualified name: two twins of one name stay apart (the LLVM symbol)
        name = re.sub(r"\W", "_", f"{scalar_fn.__module__}.{scalar_fn.__qualname__}")
        known = _PRIMITIVES.setdefault(name, scalar_fn)
        if known is not scalar_fn:
            raise Untraceable(f"two scalar twins named {name}")
        return _wrap(result, _graph().add(("call", name), operands, result.dtype))


def _label_compare(ufunc, inputs):
    """``labels == "tensor"`` where ``labels`` is a string table read at traced indices
    (a kernel's binding unit): recorded as a test of the index."""
    if ufunc.__name__ not in ("equal", "not_equal") or len(inputs) != 2:
        return None
    labels = [x for x in inputs if isinstance(x, TracedArray) and x.dtype.kind == "U"]
    if not labels:
        return None
    text = [x for x in inputs if isinstance(x, str)]
    op, operands, _ = _graph().nodes[labels[0]._node]
    if not text or op[0] != "take":
        raise Untraceable("comparing traced strings")
    hits = tuple(i for i, v in enumerate(op[1]) if v == text[0])
    result = ufunc(labels[0].view(np.ndarray), text[0])
    return _wrap(result, _graph().add(("isin", hits, ufunc.__name__ == "not_equal"),
                                      operands, np.bool_))


def _where(cond, a=None, b=None):
    if a is None or b is None:
        raise Untraceable("numpy.where(cond) (indices)")
    operands, values = zip(*(_operand(x) for x in (cond, a, b)))
    result = np.where(*values)
    return _wrap(result, _graph().add(("where",), operands, result.dtype))


def _broadcast_to(x, shape, subok=False):
    if not isinstance(x, TracedArray):
        return np.broadcast_to(x, shape, subok=subok)
    return _wrap(np.broadcast_to(x.view(np.ndarray), shape).copy(), x._node)


def _broadcast_arrays(*args, subok=False):
    shape = np.broadcast_shapes(*(np.shape(x) for x in args))
    return tuple(_broadcast_to(x, shape) for x in args)


def _stack(arrays, axis=0, out=None, **kwargs):
    if axis != 0 or out is not None or kwargs:
        raise Untraceable("numpy.stack(axis != 0)")
    operands, values = zip(*(_operand(x) for x in arrays))
    shape = np.broadcast_shapes(*(np.shape(v) for v in values))
    result = np.stack([np.broadcast_to(v, shape) for v in values])
    return _wrap(result, _graph().add(("stack",), operands, result.dtype))


def _argmax(a, axis=None, out=None, **kwargs):
    if axis != 0 or out is not None or kwargs or not isinstance(a, TracedArray):
        raise Untraceable("numpy.argmax other than over a stack's first axis")
    if _graph().nodes[a._node][0] != ("stack",):
        raise Untraceable("numpy.argmax of a traced array that is not a stack")
    result = np.argmax(a.view(np.ndarray), axis=0)
    return _wrap(result, _graph().add(("argmax",), (a._node,), result.dtype))


def _clip(a, a_min, a_max, out=None, **kwargs):
    if out is not None or kwargs:
        raise Untraceable("numpy.clip with out= or keywords")
    result = a
    if a_min is not None:
        result = np.maximum(result, a_min)
    if a_max is not None:
        result = np.minimum(result, a_max)
    return result


def _all(a, axis=None, **kwargs):
    if axis is not None or kwargs:
        raise Untraceable("numpy.all(axis)")
    return a.all() if isinstance(a, TracedArray) else np.all(_plain(a))


def _any(a, axis=None, **kwargs):
    if axis is not None or kwargs:
        raise Untraceable("numpy.any(axis)")
    return a.any() if isinstance(a, TracedArray) else np.any(_plain(a))


def _isin(element, test_elements, **kwargs):
    if kwargs or isinstance(test_elements, TracedArray):
        raise Untraceable("numpy.isin of traced test elements")
    values = [v.item() if isinstance(v, np.generic) else v
              for v in np.asarray(test_elements).ravel()]
    result = np.isin(element.view(np.ndarray), values)
    hits = []
    for v in values:
        hits.append(np.equal(element, v))
    out = hits[0] if hits else np.zeros_like(result)
    for h in hits[1:]:
        out = np.logical_or(out, h)
    return out


def _interp(x, xp, fp, left=None, right=None, period=None):
    if period is not None or isinstance(xp, TracedArray) or isinstance(fp, TracedArray):
        raise Untraceable("numpy.interp with traced points or a period")
    if not isinstance(x, TracedArray):
        return np.interp(x, xp, fp, left=left, right=right)
    xp = np.asarray(xp, dtype=np.float64).ravel()
    fp = np.asarray(fp, dtype=np.float64).ravel()
    if len(xp) < 2 or len(xp) != len(fp):
        raise Untraceable("numpy.interp of fewer than two points")
    result = np.interp(x.view(np.ndarray), xp, fp, left=left, right=right)
    ends = (float(fp[0]) if left is None else float(left),
            float(fp[-1]) if right is None else float(right))
    return _wrap(result, _graph().add(("interp", tuple(xp.tolist()), tuple(fp.tolist()), ends),
                                      (x._node,), result.dtype))


#: numpy functions a trace records (``__array_function__``); any other raises Untraceable.
_FUNCTIONS = {
    "where": _where, "broadcast_to": _broadcast_to, "broadcast_arrays": _broadcast_arrays,
    "stack": _stack, "argmax": _argmax, "clip": _clip, "all": _all, "any": _any,
    "isin": _isin, "interp": _interp, "copy": lambda a, *args, **kwargs: a.copy(),
    "shape": lambda a: a.shape, "ndim": lambda a: a.ndim, "size": lambda a, axis=None: a.size,
    "asanyarray": lambda a, dtype=None, **kwargs: a if dtype is None else a.astype(dtype),
    "result_type": lambda *args: np.result_type(*(_plain(a) for a in args)),
    "broadcast_shapes": lambda *shapes: np.broadcast_shapes(*shapes),
}

#: Scalar twins of the primitives met so far (``perfsim.mathops.elementwise``), by name.
_PRIMITIVES: dict = {}


# --------------------------------------------------------------------------- tracing


class Trace:
    """What :func:`trace` recorded: the graph, the input names in order, the outputs
    (``name -> node index, Const or None``) and the sampled values of every output."""

    def __init__(self, graph, inputs, outputs, sampled):
        self.graph, self.inputs, self.outputs, self.sampled = graph, inputs, outputs, sampled


def _holds_traced(x) -> bool:
    return isinstance(x, TracedArray) or (
        isinstance(x, (list, tuple)) and any(_holds_traced(v) for v in x))


def _refusing(convert):
    """``convert`` (``np.asarray`` and kin) that refuses a traced array: its result would be a
    plain array of the sampled values, and a decision made on it would hold only for them."""
    def wrapper(*args, **kwargs):
        if args and _holds_traced(args[0]):
            import traceback
            caller = traceback.extract_stack(limit=2)[0]
            raise Untraceable(f"numpy.{convert.__name__} of a traced array at "
                              f"{Path(caller.filename).name}:{caller.lineno} (the model "
                              "converts with perfsim.mathops.asarray)")
        return convert(*args, **kwargs)
    wrapper.__wrapped__ = convert
    return wrapper


#: numpy's converters that drop the subclass (not dispatched to ``__array_function__``):
#: refused for traced arrays while a trace runs.
_CONVERTERS = ("asarray", "array", "ascontiguousarray", "asfortranarray")


@contextlib.contextmanager
def _tracing(graph: Graph):
    with _TRACE_LOCK:
        _ACTIVE.graph = graph
        saved = {name: getattr(np, name) for name in _CONVERTERS}
        for name, convert in saved.items():
            setattr(np, name, _refusing(convert))
        try:
            yield
        finally:
            for name, convert in saved.items():
                setattr(np, name, convert)
            _ACTIVE.graph = None


def trace(fn, inputs: dict) -> Trace:
    """Run ``fn(traced_inputs)`` on :class:`TracedArray` copies of ``inputs`` (one-dimensional
    arrays of sampled rows) and record it. ``fn`` returns a dict of outputs: traced arrays,
    numbers (the same for every row) or None.

    Raises:
        Untraceable: what ``fn`` did that cannot be recorded; any exception ``fn`` raises
            passes through.
    """
    graph = Graph()
    with _tracing(graph):
        traced = {name: _wrap(np.ascontiguousarray(v),
                              graph.add(("input", name), (), np.asarray(v).dtype))
                  for name, v in inputs.items()}
        results = fn(traced)
    outputs, sampled = {}, {}
    for name, value in results.items():
        if isinstance(value, TracedArray):
            outputs[name] = value._node
            sampled[name] = value.view(np.ndarray)
        elif value is None:
            outputs[name] = None
        elif isinstance(value, np.ndarray) and value.size != 1:
            raise Untraceable(f"output {name!r} is an array the trace did not record")
        else:
            value = np.asarray(value).reshape(())
            if value.dtype.kind not in "biufU":
                raise Untraceable(f"output {name!r} of dtype {value.dtype}")
            outputs[name] = Const(value.item())
    return Trace(graph, list(inputs), outputs, sampled)


# --------------------------------------------------------------------------- code generation

_UNARY_FLOAT = {"ceil": "llvm.ceil", "floor": "llvm.floor", "trunc": "llvm.trunc",
                "rint": "llvm.rint", "sqrt": "llvm.sqrt", "exp": "llvm.exp",
                "exp2": "llvm.exp2", "log": "llvm.log", "log2": "llvm.log2",
                "log10": "llvm.log10"}
_ROUNDING = frozenset({"ceil", "floor", "trunc", "rint"})
_COMPARE = {"greater": ">", "greater_equal": ">=", "less": "<", "less_equal": "<=",
            "equal": "==", "not_equal": "!="}
#: ufuncs a trace records: those :func:`generate` emits.
UFUNCS = frozenset({"add", "subtract", "multiply", "true_divide", "divide", "floor_divide",
                    "remainder", "power", "maximum", "minimum", "fmax", "fmin", "negative",
                    "absolute", "logical_and", "logical_or", "logical_not", "logical_xor",
                    "bitwise_and", "bitwise_or", "bitwise_xor", "invert", "right_shift",
                    "left_shift", "isnan", "isinf",
                    "isfinite", "square", "reciprocal", *_UNARY_FLOAT, *_COMPARE})


def _kind(dtype) -> str:
    """``"f"`` (float64), ``"i"`` (int64) or ``"b"`` (bool) for a numpy dtype."""
    kind = np.dtype(dtype).kind
    if kind in "iu":
        return "i"
    if kind in "fb":
        return kind
    raise Untraceable(f"a value of dtype {dtype}")


class Program:
    """One traced structure as LLVM IR: ``kernel(i8** pointers, i64 lo, i64 hi, i64 n0,
    i64 n1, i64 n2)`` evaluates the rows of an ``n0 x n1 x n2`` block (C order) whose
    last-axis index lies in ``lo..hi``. Each input varies along one axis (:attr:`axes`:
    ``_Grid.blocks``' batch 0, heads 1, sequence lengths 2; or every input along axis 0 for
    a flat list of rows); the outer loop runs over axis 2, so what depends on the sequence
    lengths alone (tile counts, the floor sums) is computed once per length, as numpy's
    broadcasting does, and the inner loop over the ``n0 · n1`` (batch, heads) pairs of the
    length, batch-major (an input along axis 0 or 1 is passed repeated to one value per
    pair, :func:`run`), so the vectorised loop has more than a handful of rows; it writes
    each output column length-major (``row = i2 · n0 · n1 + pair``), which :func:`run`
    returns as a view of the block's shape. ``pointers``: the inputs (one array per input,
    along its axis), the float64 and int64 constant vectors, the output columns (slots of
    :attr:`plan`) and the guard flag (one byte, cleared where a row fails a guard).

    ``plan``: ``name -> ("row", (slot, dtype, labels or None))`` a column the loop writes
    (``labels``: a string table it writes indices into), ``("const", value)`` or
    ``("none", None)``. ``key``: SHA-1 of the IR, which holds no constant's value — GPUs
    and what-ifs that take the same branches share one compiled kernel."""

    def __init__(self, ir_text, inputs, axes, floats, ints, plan, n_slots, primitives):
        self.ir_text, self.inputs, self.axes = ir_text, inputs, axes
        self.floats, self.ints = floats, ints
        self.plan, self.n_slots, self.primitives = plan, n_slots, primitives
        self.key = hashlib.sha1(ir_text.encode()).hexdigest()
        self.checked = False


#: Loop level of each block axis: the sequence lengths (axis 2) outer, the (batch, heads)
#: pairs (axes 0 and 1, one flattened loop) inner.
_LEVEL = {2: 0, 1: 1, 0: 1}


def generate(tr: Trace, axes: dict | None = None) -> Program:
    """The LLVM IR of ``tr`` (:class:`Program`): two nested loops, over the block's axis 2
    and over its (axis 0, axis 1) pairs, one or a few instructions per recorded node, each
    node in the outer loop where its inputs allow, in trace order. ``axes``: input name ->
    block axis (default: every input along axis 0, a flat list of rows in the inner,
    vectorised loop).

    Raises:
        Untraceable: a node the emitter has no form for (its rows are evaluated by numpy).
    """
    axes = axes or {name: 0 for name in tr.inputs}
    needed = _needed(tr)
    consts = _Constants(tr, needed)
    plan, slots = _plan(tr)
    signature = _signature(tr, needed, axes)
    cached = _IR.get(signature)
    if cached is None:
        cached = _IR[signature] = _emit(tr, axes, needed, consts, plan, slots)
        if len(_IR) > 256:
            _IR.pop(next(iter(_IR)))
    ir_text, primitives = cached
    return Program(ir_text, list(tr.inputs), dict(axes), consts.floats, consts.ints, plan,
                   len(slots), primitives)


#: Generated IR by structure (:func:`_signature`): a structure traced again (another GPU,
#: head dim or what-if taking the same branches) is not emitted again.
_IR: dict = {}


def _needed(tr: Trace) -> list[int]:
    """The nodes the outputs and guards depend on, in trace order."""
    nodes = tr.graph.nodes
    needed: set[int] = set()
    stack = [n for n in tr.outputs.values() if isinstance(n, int)]
    stack += [g for g, _ in tr.graph.guards]
    while stack:
        i = stack.pop()
        if i not in needed:
            needed.add(i)
            op, args, _ = nodes[i]
            stack.extend(a for a in args if isinstance(a, int))
            if op[0] == "argmax":
                stack.extend(a for a in nodes[args[0]][1] if isinstance(a, int))
    return sorted(needed)


def _operands(tr: Trace, i: int):
    op, args, _ = tr.graph.nodes[i]
    return tr.graph.nodes[args[0]][1] if op[0] == "argmax" else args


class _Constants:
    """The numbers of a trace in the order the IR reads them: ``slots`` (a Const's id ->
    ``("f" | "i", index)`` into :attr:`floats` / :attr:`ints`, or ``("b", value)``, written
    into the IR) and ``tables`` (a numeric ``take`` node -> ``(kind, offset)``)."""

    def __init__(self, tr: Trace, needed: list[int]):
        floats: list[float] = []
        ints: list[int] = []
        self.slots: dict[int, tuple] = {}
        self.tables: dict[int, tuple] = {}
        for i in needed:
            op, _, dtype = tr.graph.nodes[i]
            for a in _operands(tr, i):
                if not isinstance(a, Const) or id(a) in self.slots:
                    continue
                value = a.value
                if isinstance(value, bool):
                    self.slots[id(a)] = ("b", value)
                elif isinstance(value, int):
                    self.slots[id(a)] = ("i", len(ints))
                    ints.append(value)
                elif isinstance(value, float):
                    self.slots[id(a)] = ("f", len(floats))
                    floats.append(value)
                else:
                    raise Untraceable(f"a constant of type {type(value).__name__}")
            if op[0] == "interp":
                self.tables[i] = ("f", len(floats))
                floats.extend([*op[1], *op[2], *op[3]])
            if op[0] == "take" and dtype.kind != "U":
                kind = _kind(dtype)
                if kind == "f":
                    self.tables[i] = ("f", len(floats))
                    floats.extend(float(v) for v in op[1])
                elif kind == "i":
                    self.tables[i] = ("i", len(ints))
                    ints.extend(int(v) for v in op[1])
                else:
                    raise Untraceable("a table of booleans")
        self.floats = np.array(floats, dtype=np.float64)
        self.ints = np.array(ints, dtype=np.int64)


def _plan(tr: Trace):
    """``(plan, slots)`` of :class:`Program` (``slots``: output name -> column slot)."""
    nodes = tr.graph.nodes
    slots = {name: slot for slot, name in enumerate(
        [n for n, node in tr.outputs.items() if isinstance(node, int)])}
    plan = {}
    for name, node in tr.outputs.items():
        if node is None:
            plan[name] = ("none", None)
        elif isinstance(node, Const):
            plan[name] = ("const", node.value)
        else:
            op, _, dtype = nodes[node]
            labels = op[1] if op[0] == "take" and dtype.kind == "U" else None
            out_dtype = (np.dtype(np.int64) if labels is not None
                         else {"f": np.dtype(np.float64), "i": np.dtype(np.int64),
                               "b": np.dtype(np.bool_)}[_kind(dtype)])
            plan[name] = ("row", (slots[name], out_dtype, labels))
    return plan, slots


def _signature(tr: Trace, needed: list[int], axes: dict) -> tuple:
    """What the IR depends on: each needed node's operation (a numeric table by its length),
    operands (a number by its type; a boolean by its value) and dtype; the guards, outputs
    and input axes — not the numbers, which travel in the constant vectors."""
    nodes = tr.graph.nodes
    tokens = []
    for i in needed:
        op, args, dtype = nodes[i]
        if op[0] == "take" and dtype.kind != "U":
            op = ("take", len(op[1]))
        elif op[0] == "interp":
            op = ("interp", len(op[1]))
        operands = tuple(
            a if isinstance(a, int) else (type(a.value).__name__,
                                          a.value if isinstance(a.value, bool) else None)
            for a in args)
        tokens.append((i, op, operands, dtype.str))
    outputs = tuple((name, node if isinstance(node, int) or node is None
                     else type(node.value).__name__) for name, node in tr.outputs.items())
    return (tuple(tokens), tuple(tr.graph.guards), outputs, tuple(sorted(axes.items())),
            tuple(tr.inputs))


def _emit(tr: Trace, axes: dict, needed: list[int], consts: _Constants, plan: dict,
          slots: dict):
    """``(IR text, primitives)`` of :func:`generate`."""
    from llvmlite import ir

    f64, i64, i1, i8 = ir.DoubleType(), ir.IntType(64), ir.IntType(1), ir.IntType(8)
    types = {"f": f64, "i": i64, "b": i1}
    nodes = tr.graph.nodes
    # each node's loop level: the innermost of its operands' (an argmax's: its stack's)
    level: dict[int, int] = {}
    for i, (op, args, _) in enumerate(nodes):
        if op[0] == "input":
            level[i] = _LEVEL[axes[op[1]]]
            continue
        operands = nodes[args[0]][1] if op[0] == "argmax" else args
        level[i] = max([level[a] for a in operands if isinstance(a, int)], default=0)
    module = ir.Module(name="perfsim_kernel")
    n_in = len(tr.inputs)
    n_slots = len(slots)

    def elem_type(kind):
        return types[kind] if kind != "b" else i8

    # the pointers in their order in the caller's array: inputs, the constant vectors, the
    # output columns, the guard flag
    pointee = ([elem_type(_kind(nodes[k][2])) for k in range(n_in)] + [f64, i64]
               + [None] * n_slots + [i8])
    for kind, detail in plan.values():
        if kind == "row":
            pointee[n_in + 2 + detail[0]] = elem_type(_kind(detail[1]))
    # ``kernel`` unpacks the array and calls ``rows``, whose pointer parameters are
    # ``noalias`` (each its own buffer): LLVM may then keep values in registers across the
    # stores and needs no run-time overlap checks
    fn = ir.Function(module, ir.FunctionType(
        ir.VoidType(), [i8.as_pointer().as_pointer(), i64, i64, i64, i64, i64]), name="kernel")
    rows_fn = ir.Function(module, ir.FunctionType(
        ir.VoidType(), [t.as_pointer() for t in pointee] + [i64] * 5), name="rows")
    for arg in rows_fn.args[:len(pointee)]:
        arg.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    pointers = fn.args[0]
    b.call(rows_fn, [b.bitcast(b.load(b.gep(pointers, [ir.Constant(i64, k)])), t.as_pointer())
                     for k, t in enumerate(pointee)] + list(fn.args[1:]))
    b.ret_void()
    *params, lo, hi, n0, n1, n2 = rows_fn.args
    entry = rows_fn.append_basic_block("entry")
    done = rows_fn.append_basic_block("done")
    fn = rows_fn
    b = ir.IRBuilder(entry)
    input_ptrs = {name: params[k] for k, name in enumerate(tr.inputs)}
    kf, ki = params[n_in], params[n_in + 1]
    const_values: dict[int, tuple] = {}
    for key, (kind, value) in consts.slots.items():
        if kind == "b":
            const_values[key] = (ir.Constant(i1, int(value)), "b")
        else:
            base = ki if kind == "i" else kf
            const_values[key] = (b.load(b.gep(base, [ir.Constant(i64, value)])), kind)
    out_ptrs = {name: params[n_in + 2 + detail[0]]
                for name, (kind, detail) in plan.items() if kind == "row"}
    ok_ptr = params[n_in + 2 + n_slots]
    values: dict[int, tuple] = {}

    def read(a):
        return const_values[id(a)] if isinstance(a, Const) else values[a]

    def convert(value, src: str, dst: str):
        if src == dst:
            return value
        if dst == "f":
            return b.sitofp(value, f64) if src == "i" else b.uitofp(value, f64)
        if dst == "i":
            return b.zext(value, i64) if src == "b" else b.fptosi(value, i64)
        if src == "i":
            return b.icmp_signed("!=", value, ir.Constant(i64, 0))
        return b.fcmp_unordered("!=", value, ir.Constant(f64, 0.0))

    def intrinsic(name, *args):
        return b.call(module.declare_intrinsic(name, [f64]), list(args))

    def isnan(x):
        return b.fcmp_unordered("uno", x, x)

    primitives = {}
    # per-row flags (i1, true: the row is outside what an emitted operation computes exactly,
    # so the block goes back to numpy, as a failed guard sends it)
    checks: list = []

    def emit(i):
        op, args, dtype = nodes[i]
        kind = op[0]
        if kind == "stack":
            return                            # read by its argmax
        if kind == "input":
            value = b.load(b.gep(input_ptrs[op[1]], [index[axes[op[1]]]]))
            if _kind(dtype) == "b":
                value = b.icmp_unsigned("!=", value, ir.Constant(i8, 0))
            values[i] = (value, _kind(dtype))
            return
        if kind == "argmax":
            items = [convert(*read(a), "f") for a in nodes[args[0]][1]]
            best, where_ = items[0], ir.Constant(i64, 0)
            for j, item in enumerate(items[1:], 1):
                take = b.and_(b.fcmp_ordered("ord", best, best),
                              b.or_(isnan(item), b.fcmp_ordered(">", item, best)))
                best = b.select(take, item, best)
                where_ = b.select(take, ir.Constant(i64, j), where_)
            values[i] = (where_, "i")
            return
        out_kind = _kind(dtype) if not (kind == "take" and dtype.kind == "U") else "i"
        ops = [read(a) for a in args]
        if kind == "cast":
            value = convert(*ops[0], out_kind)
        elif kind == "where":
            value = b.select(convert(*ops[0], "b"), convert(*ops[1], out_kind),
                             convert(*ops[2], out_kind))
        elif kind == "call":
            name = op[1]
            if out_kind != "i":
                raise Untraceable(f"primitive {name} returning {dtype}")
            symbol = f"perfsim_{name}"
            callee = module.globals.get(symbol) or ir.Function(
                module, ir.FunctionType(i64, [i64] * len(ops)), name=symbol)
            primitives[symbol] = (name, len(ops))
            value = b.call(callee, [convert(*o, "i") for o in ops])
        elif kind == "take":
            position = convert(*ops[0], "i")
            if dtype.kind == "U":
                value = position              # labels: the loop writes the index
            else:
                # numeric tables travel with the constants (the IR holds their offsets)
                kind_, offset = consts.tables[i]
                base = kf if kind_ == "f" else ki
                value = b.load(b.gep(base, [b.add(position, ir.Constant(i64, offset))]))
        elif kind == "interp":
            value = _emit_interp(b, ir, convert(*ops[0], "f"), len(op[1]), kf,
                                 consts.tables[i][1], isnan)
        elif kind == "isin":
            hits, negate = op[1], op[2]
            position = convert(*ops[0], "i")
            value = ir.Constant(i1, 0)
            for h in hits:
                value = b.or_(value, b.icmp_signed("==", position, ir.Constant(i64, h)))
            if negate:
                value = b.not_(value)
        elif kind == "ufunc":
            value = _emit_ufunc(b, ir, op[1], ops, out_kind, convert, intrinsic, isnan, types,
                                checks)
        else:
            raise Untraceable(f"a node {op!r}")
        values[i] = (value, out_kind)

    # two nested counted loops (axis 2; the pairs of axes 0 and 1), each node in the first
    # loop that has all its operands; the inner one writes every output of the row and
    # checks the guards
    index = {}
    loops = []
    order = needed
    pre = entry
    first = fn.append_basic_block("axis2")
    inner = b.mul(n0, n1)
    b.cbranch(b.icmp_signed("<", lo, hi), first, done)
    for depth, (axis, start, end) in enumerate(((2, lo, hi), (1, ir.Constant(i64, 0), inner))):
        body = first if depth == 0 else fn.append_basic_block(f"axis{axis}")
        if depth:
            b.branch(body)
        b.position_at_end(body)
        counter = b.phi(i64, name=f"i{axis}")
        counter.add_incoming(start, pre)
        index[axis] = counter
        if depth == 1:
            index[0] = counter
        loops.append((counter, body, end))
        if depth == 1:
            # the rows' guard failures, or-ed along the innermost loop (a reduction, no
            # branch or store per row: the loop stays vectorisable)
            failed = b.phi(i1, name="failed")
            failed.add_incoming(ir.Constant(i1, 0), pre)
        for i in order:
            if level[i] == depth:
                emit(i)
        pre = b.block
    bad = ir.Constant(i1, 0)
    for node, expected in tr.graph.guards:
        value, vk = values[node]
        if isinstance(expected, bool) or vk == "b":
            differs = b.icmp_unsigned("!=", convert(value, vk, "b"),
                                      ir.Constant(i1, int(bool(expected))))
        elif isinstance(expected, float) or vk == "f":
            x = convert(value, vk, "f")
            differs = (b.fcmp_ordered("ord", x, x) if isinstance(expected, float)
                       and math.isnan(expected)
                       else b.fcmp_unordered("!=", x, ir.Constant(f64, float(expected))))
        else:
            differs = b.icmp_signed("!=", value, ir.Constant(i64, int(expected)))
        bad = b.or_(bad, differs)
    for flag in checks:
        bad = b.or_(bad, flag)
    row = b.add(b.mul(index[2], inner), index[1])
    for name, node in tr.outputs.items():
        if plan[name][0] != "row":
            continue
        value, vk = values[node]
        ok_kind = _kind(plan[name][1][1])
        stored = convert(value, vk, ok_kind)
        if ok_kind == "b":
            stored = b.zext(stored, i8)
        b.store(stored, b.gep(out_ptrs[name], [row]))
    failed_after = b.or_(failed, bad)
    failed.add_incoming(failed_after, b.block)
    # close the loops, innermost first
    for depth in (1, 0):
        counter, body, end = loops[depth]
        after = b.add(counter, ir.Constant(i64, 1))
        counter.add_incoming(after, b.block)
        exit_ = done if depth == 0 else fn.append_basic_block(f"after{depth}")
        b.cbranch(b.icmp_signed("<", after, end), body, exit_)
        b.position_at_end(exit_)
        if depth == 1 and (tr.graph.guards or checks):
            with b.if_then(failed_after):
                b.store(ir.Constant(i8, 0), ok_ptr)
    b.ret_void()
    return str(module), primitives


def _emit_ufunc(b, ir, name, ops, kind, convert, intrinsic, isnan, types, checks):
    """One ufunc of numpy's semantics on operands ``[(value, kind), ...]``, result ``kind``.
    ``checks``: where an operation is exact only on part of its domain (the divisions), the
    flag of the rows outside it is appended (those blocks run on numpy)."""
    f64, i64 = types["f"], types["i"]
    if name in _COMPARE:
        common = "f" if any(k == "f" for _, k in ops) else "i"
        x, y = (convert(v, k, common) for v, k in ops)
        if common == "f":
            return (b.fcmp_unordered("!=", x, y) if name == "not_equal"
                    else b.fcmp_ordered(_COMPARE[name], x, y))
        return b.icmp_signed(_COMPARE[name], x, y)
    if name in ("logical_and", "logical_or", "logical_xor", "logical_not"):
        xs = [convert(v, k, "b") for v, k in ops]
        if name == "logical_not":
            return b.not_(xs[0])
        return {"logical_and": b.and_, "logical_or": b.or_, "logical_xor": b.xor}[name](*xs)
    if name in ("isnan", "isinf", "isfinite"):
        x = convert(*ops[0], "f")
        if name == "isnan":
            return isnan(x)
        size = intrinsic("llvm.fabs", x)
        inf = ir.Constant(f64, float("inf"))
        return (b.fcmp_ordered("==", size, inf) if name == "isinf"
                else b.fcmp_ordered("<", size, inf))
    if name in _ROUNDING and ops[0][1] != "f":
        # numpy >= 2.3 rounds an integer or boolean to itself (its own dtype); before, to
        # float64: either way the value, in the result's kind
        return convert(*ops[0], kind)
    if name in _UNARY_FLOAT:
        return intrinsic(_UNARY_FLOAT[name], convert(*ops[0], "f"))
    xs = [convert(v, k, kind) for v, k in ops]
    if kind == "b":
        table = {"add": b.or_, "multiply": b.and_, "maximum": b.or_, "minimum": b.and_,
                 "bitwise_and": b.and_, "bitwise_or": b.or_, "bitwise_xor": b.xor,
                 "fmax": b.or_, "fmin": b.and_}
        if name == "invert":
            return b.not_(xs[0])
        if name not in table:
            raise Untraceable(f"numpy.{name} on booleans")
        return table[name](*xs)
    x = xs[0]
    y = xs[1] if len(xs) > 1 else None
    arithmetic = ({"add": b.fadd, "subtract": b.fsub, "multiply": b.fmul} if kind == "f"
                  else {"add": b.add, "subtract": b.sub, "multiply": b.mul})
    if name in arithmetic:
        return arithmetic[name](x, y)
    if name == "square":
        return arithmetic["multiply"](x, x)
    if kind == "f":
        if name in ("true_divide", "divide"):
            return b.fdiv(x, y)
        if name == "reciprocal":
            return b.fdiv(ir.Constant(f64, 1.0), x)
        if name == "negative":
            return b.fneg(x)
        if name == "absolute":
            return intrinsic("llvm.fabs", x)
        if name == "power":
            return intrinsic("llvm.pow", x, y)
        if name in ("maximum", "minimum"):
            # numpy's array loops: a where a > b (a < b) or a is NaN, else b — NaN
            # propagates, and of two equal values (0.0 and -0.0) the second is kept
            keep = b.or_(b.fcmp_ordered(">" if name == "maximum" else "<", x, y), isnan(x))
            return b.select(keep, x, y)
        if name in ("fmax", "fmin"):
            keep = b.or_(b.fcmp_ordered(">" if name == "fmax" else "<", x, y), isnan(y))
            return b.select(keep, x, y)
        if name in ("floor_divide", "remainder"):
            return _float_divmod(b, ir, x, y, name, intrinsic, f64, checks)
        raise Untraceable(f"numpy.{name} on floats")
    zero = ir.Constant(i64, 0)
    if name == "negative":
        return b.sub(zero, x)
    if name == "absolute":
        return b.select(b.icmp_signed("<", x, zero), b.sub(zero, x), x)
    if name in ("maximum", "fmax"):
        return b.select(b.icmp_signed(">=", x, y), x, y)
    if name in ("minimum", "fmin"):
        return b.select(b.icmp_signed("<=", x, y), x, y)
    if name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        return {"bitwise_and": b.and_, "bitwise_or": b.or_, "bitwise_xor": b.xor}[name](x, y)
    if name == "invert":
        return b.xor(x, ir.Constant(i64, -1))
    if name in ("right_shift", "left_shift"):
        # numpy's int64 shifts: a count from 0 to 63 shifts (right: arithmetic); any other
        # count gives what shifting one place at a time would (0, or -1 right of a negative)
        inside = b.icmp_unsigned("<", y, ir.Constant(i64, 64))
        safe = b.select(inside, y, zero)
        if name == "right_shift":
            outside = b.select(b.icmp_signed("<", x, zero), ir.Constant(i64, -1), zero)
            return b.select(inside, b.ashr(x, safe), outside)
        return b.select(inside, b.shl(x, safe), zero)
    if name in ("floor_divide", "remainder"):
        # numpy: x // 0 and x % 0 are 0; otherwise floored (the sign of the divisor). Through
        # doubles, which vectorise where the CPU's integer division does not: for
        # |x|, |y| <= 2^53 both convert exactly and floor(fl(x / y)) is floor(x / y) — an
        # integer n != x / y lies at least 1/|y| from it, more than fl's rounding error
        # |x / y| · 2^-53 < 1/|y| — and x − y · q is exact in int64. Rows outside: numpy.
        is_zero = b.icmp_signed("==", y, zero)
        safe = b.select(is_zero, ir.Constant(i64, 1), y)
        limit = ir.Constant(i64, 1 << 53)
        for v in (x, safe):
            magnitude = b.select(b.icmp_signed("<", v, zero), b.sub(zero, v), v)
            # (the negation of -2^63 wraps negative: unsigned, it is past the limit too)
            checks.append(b.icmp_unsigned(">", magnitude, limit))
        q = b.fptosi(intrinsic("llvm.floor", b.fdiv(b.sitofp(x, f64), b.sitofp(safe, f64))),
                     i64)
        value = q if name == "floor_divide" else b.sub(x, b.mul(safe, q))
        return b.select(is_zero, zero, value)
    raise Untraceable(f"numpy.{name} on integers")


def _emit_interp(b, ir, x, n, kf, offset, isnan):
    """numpy's ``interp`` (``arr_interp``) of ``x`` over ``n`` points whose abscissae,
    ordinates and the two end values lie at ``kf[offset:]``: NaN stays NaN; left of the first
    point the left value, right of the last the right value, on the last point its
    ordinate, on a point its ordinate; else ``slope · (x − x_j) + y_j`` with the slope of
    segment ``j``, from the other end of the segment where that is NaN, and ``y_j`` where
    both are NaN on a flat segment."""
    i64 = ir.IntType(64)

    def at(k):
        return b.load(b.gep(kf, [b.add(k, ir.Constant(i64, offset))]))

    def const_at(k):
        return at(ir.Constant(i64, k))

    count = ir.Constant(i64, 0)
    for k in range(n):
        count = b.add(count, b.zext(b.fcmp_ordered("<=", const_at(k), x), i64))
    j = b.sub(count, ir.Constant(i64, 1))
    last = n - 1
    inner = b.select(b.icmp_signed("<", j, ir.Constant(i64, 0)), ir.Constant(i64, 0),
                     b.select(b.icmp_signed(">", j, ir.Constant(i64, last - 1)),
                              ir.Constant(i64, last - 1), j))
    x0, x1 = at(inner), at(b.add(inner, ir.Constant(i64, 1)))
    y0 = at(b.add(inner, ir.Constant(i64, n)))
    y1 = at(b.add(inner, ir.Constant(i64, n + 1)))
    slope = b.fdiv(b.fsub(y1, y0), b.fsub(x1, x0))
    value = b.fadd(b.fmul(slope, b.fsub(x, x0)), y0)
    other = b.fadd(b.fmul(slope, b.fsub(x, x1)), y1)
    value = b.select(isnan(value), other, value)
    value = b.select(b.and_(isnan(value), b.fcmp_ordered("==", y0, y1)), y0, value)
    y_j = at(b.add(b.select(b.icmp_signed("<", j, ir.Constant(i64, 0)), ir.Constant(i64, 0),
                            j), ir.Constant(i64, n)))
    value = b.select(b.fcmp_ordered("==", x0, x), y0, value)
    value = b.select(b.icmp_signed("==", j, ir.Constant(i64, last)), y_j, value)
    value = b.select(b.fcmp_ordered(">", x, const_at(last)), const_at(2 * n + 1), value)
    value = b.select(b.fcmp_ordered("<", x, const_at(0)), const_at(2 * n), value)
    return b.select(isnan(x), x, value)


def _fmod(b, ir, x, y, intrinsic, f64, checks):
    """C's ``fmod(x, y)`` (exact: the remainder of the quotient truncated) without its
    library call, so the row loop vectorises: ``t = trunc(fl(x / y))``, ``r = fma(−t, y, x)``.
    Where ``|x / y| < 2^52``, ``fl``'s rounding moves the quotient by less than 1/2, so ``t``
    is the truncated quotient or one off it; one step puts it right (``r`` of the wrong sign:
    one less in size; ``|r| >= |y|``: one more), and the fused multiply-add of the right
    ``t`` is exact, the true remainder being a double. ``r`` takes ``x``'s sign (zeros
    too). ``y = 0``, an infinite or NaN operand: ``fmod``'s NaN, or ``x`` for a finite ``x``
    over an infinite ``y``. A larger quotient: the row's flag (numpy)."""
    zero, one = ir.Constant(f64, 0.0), ir.Constant(f64, 1.0)
    inf = ir.Constant(f64, float("inf"))
    fma = b.module.declare_intrinsic("llvm.fma", [f64], ir.FunctionType(f64, [f64] * 3))
    copysign = b.module.declare_intrinsic("llvm.copysign", [f64],
                                          ir.FunctionType(f64, [f64, f64]))
    ax, ay = intrinsic("llvm.fabs", x), intrinsic("llvm.fabs", y)
    finite = b.and_(b.fcmp_ordered("<", ax, inf), b.fcmp_ordered("<", ay, inf))
    usual = b.and_(finite, b.fcmp_ordered("!=", y, zero))
    safe_y = b.select(usual, y, one)
    safe_x = b.select(usual, x, zero)
    q = b.fdiv(safe_x, safe_y)
    checks.append(b.fcmp_unordered(">=", intrinsic("llvm.fabs", q),
                                   ir.Constant(f64, 2.0 ** 52)))
    t = intrinsic("llvm.trunc", q)
    r = b.call(fma, [b.fneg(t), safe_y, safe_x])
    step = b.call(copysign, [one, q])          # towards a larger |t|
    # r of the other sign than x: t one too large in size; |r| >= |y|: one too small
    over = b.and_(b.fcmp_ordered("!=", r, zero),
                  b.icmp_unsigned("!=", b.fcmp_ordered("<", r, zero),
                                  b.fcmp_ordered("<", safe_x, zero)))
    under = b.fcmp_ordered(">=", intrinsic("llvm.fabs", r), intrinsic("llvm.fabs", safe_y))
    t = b.select(over, b.fsub(t, step), b.select(under, b.fadd(t, step), t))
    r = b.call(fma, [b.fneg(t), safe_y, safe_x])
    r = b.call(copysign, [r, safe_x])
    # y = ±inf with a finite x: x; anything else unusual (y = 0, x infinite, a NaN): the NaN
    # glibc's fmod returns, (x · y) / (x · y) — the CPU's default NaN, or a NaN operand's
    product = b.fmul(x, y)
    keep_x = b.and_(b.fcmp_ordered("<", ax, inf), b.fcmp_ordered("==", ay, inf))
    return b.select(usual, r, b.select(keep_x, x, b.fdiv(product, product)))


def _float_divmod(b, ir, x, y, name, intrinsic, f64, checks):
    """numpy's float ``floor_divide`` / ``remainder`` (``npy_divmod``): ``mod = fmod(a, b)``;
    ``div = (a - mod) / b``, one less where ``mod`` and ``b`` differ in sign (then
    ``mod += b``); the floor of ``div``, rounded up where it fell more than a half short;
    ``b == 0``: ``a / b`` and ``fmod``'s NaN. ``fmod`` is :func:`_fmod`."""
    zero = ir.Constant(f64, 0.0)
    mod = _fmod(b, ir, x, y, intrinsic, f64, checks)
    sign_differs = b.icmp_signed("!=", b.fcmp_ordered("<", y, zero),
                                 b.fcmp_ordered("<", mod, zero))
    fix = b.and_(b.fcmp_unordered("!=", mod, zero), sign_differs)
    if name == "remainder":
        fixed = b.select(fix, b.fadd(mod, y), mod)
        # a zero remainder takes the divisor's sign (copysign(0, b))
        signed_zero = b.call(b.module.declare_intrinsic(
            "llvm.copysign", [f64], ir.FunctionType(f64, [f64, f64])), [zero, y])
        return b.select(b.fcmp_ordered("==", mod, zero), signed_zero, fixed)
    div = b.fdiv(b.fsub(x, mod), y)
    div = b.select(fix, b.fsub(div, ir.Constant(f64, 1.0)), div)
    floor = intrinsic("llvm.floor", div)
    up = b.fcmp_ordered(">", b.fsub(div, floor), ir.Constant(f64, 0.5))
    floored = b.select(up, b.fadd(floor, ir.Constant(f64, 1.0)), floor)
    # div == 0: copysign(0, a / b)
    quotient = b.fdiv(x, y)
    signed_zero = b.call(b.module.declare_intrinsic(
        "llvm.copysign", [f64], ir.FunctionType(f64, [f64, f64])), [zero, quotient])
    floored = b.select(b.fcmp_ordered("==", div, zero), signed_zero, floored)
    return b.select(b.fcmp_ordered("==", y, zero), quotient, floored)


# --------------------------------------------------------------------------- compiling


def available() -> bool:
    """Whether the compiled engine can run here: llvmlite and numba importable
    (``pip install 'perfsim[fast]'``; numba compiles the primitives' scalar twins)."""
    return (importlib.util.find_spec("llvmlite") is not None
            and importlib.util.find_spec("numba") is not None)


_COMPILED: dict[tuple, tuple] = {}
_COMPILE_LOCK = threading.Lock()
#: Counters of the on-disk kernel cache in this process: kernels loaded from it, written to it.
CACHE_STATS = {"loaded": 0, "written": 0}
#: First bytes of a cached kernel file (its format; a file without them is ignored).
_CACHE_MAGIC = b"perfsim-kernel-2\n"
#: How :func:`kernel_of` compiles, part of each cached kernel's identity: a change here (or
#: to the pass pipeline) must change this text, so no process runs code compiled otherwise.
_COMPILE_SETTINGS = "new pass manager, speed_level=2, target opt=2, no fast-math"


#: Most bytes the kernel cache keeps (``PERFSIM_CACHE_MAX_BYTES`` overrides): past it, the
#: kernels used longest ago are removed after a write. A kernel is 2-150 kB (a sweep of every
#: algorithm and phase writes a few hundred), so 256 MiB holds thousands.
CACHE_MAX_BYTES = 256 * 2**20
#: A temporary file of an interrupted write older than this (seconds) is removed.
_STALE_TMP_S = 3600.0


def cache_max_bytes() -> int:
    """The kernel cache's size limit in bytes: ``PERFSIM_CACHE_MAX_BYTES`` (a whole number
    ≥ 0; 0 keeps nothing past the kernel just written) or :data:`CACHE_MAX_BYTES`. A value
    that is not a whole number ≥ 0 is ignored with a warning."""
    given = os.environ.get("PERFSIM_CACHE_MAX_BYTES", "").strip()
    if not given:
        return CACHE_MAX_BYTES
    try:
        value = int(given)
        if value < 0:
            raise ValueError
        return value
    except ValueError:
        warnings.warn(f"PERFSIM_CACHE_MAX_BYTES={given!r} is not a whole number of bytes "
                      f"≥ 0; the kernel cache keeps its default limit ({CACHE_MAX_BYTES} B)",
                      RuntimeWarning, stacklevel=2)
        return CACHE_MAX_BYTES


def _cache_trim(folder: Path, keep: Path) -> None:
    """Hold the cache under :func:`cache_max_bytes`: remove the kernel files used longest
    ago (file times: a load touches its file) until the rest fit, never ``keep`` (the one
    just written), and the temporary files of writes interrupted over
    :data:`_STALE_TMP_S` ago. Errors (a file another process removed first) are skipped."""
    limit, now = cache_max_bytes(), time.time()
    kernels, total = [], 0
    try:
        with os.scandir(folder) as it:
            for entry in it:
                try:
                    if not entry.is_file(follow_symlinks=False):
                        continue
                    st = entry.stat(follow_symlinks=False)
                    if entry.name.endswith(".tmp"):
                        if now - st.st_mtime > _STALE_TMP_S:
                            os.unlink(entry.path)
                    elif entry.name.endswith(".o"):
                        kernels.append((st.st_mtime, entry.path, st.st_size))
                        total += st.st_size
                except OSError:
                    continue
    except OSError:
        return
    if total <= limit:
        return
    for _mtime, path, size in sorted(kernels):
        if total <= limit:
            break
        if path == str(keep):
            continue
        with contextlib.suppress(OSError):
            os.unlink(path)
            total -= size


def kernel_cache_dir() -> Path | None:
    """Where compiled kernels' machine code is kept between processes: ``PERFSIM_CACHE_DIR``
    (empty: no cache), else ``$XDG_CACHE_HOME/perfsim/kernels`` (``~/.cache`` without it).
    A file holds one kernel's object code after a SHA-256 of it; one that fails the check
    is ignored and compiled again. Safe to delete at any time. The files are machine code
    this process runs: the folder should be writable by its user alone, as numba's cache."""
    given = os.environ.get("PERFSIM_CACHE_DIR")
    if given is not None:
        given = given.strip()
        return Path(given).expanduser() if given else None
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(base) if base else Path.home() / ".cache") / "perfsim" / "kernels"


def _cache_entry(program_key: str, vectorize: bool) -> tuple[Path, bytes] | None:
    """``(file, identity)`` of a kernel in the cache, or None (no cache, or no folder can be
    named: no home directory, an unknown ``~user``). The identity — the IR's key, the loop
    vectorisation, this CPU (name and features: the code uses its instruction set), the
    target triple, LLVM's and llvmlite's versions and :data:`_COMPILE_SETTINGS` — names the
    file and is stored in it, so a file copied or renamed onto another kernel's name is not
    loaded."""
    try:
        folder = kernel_cache_dir()
        if folder is None:
            return None
        import llvmlite
        import llvmlite.binding as llvm

        cpu, features = _TARGET
        identity = "\n".join((program_key, str(vectorize), cpu, features,
                               llvm.get_default_triple(), str(llvm.llvm_version_info),
                               llvmlite.__version__, _COMPILE_SETTINGS)).encode()
        return folder / f"{hashlib.sha256(identity).hexdigest()}.o", identity
    except Exception:       # noqa: BLE001 - a cache folder that cannot be named: no cache
        return None


def _cache_load(entry: tuple[Path, bytes] | None) -> bytes | None:
    """The object code cached for ``entry``, or None (none, not a regular file, unreadable,
    another kernel's, or failing its SHA-256)."""
    if entry is None:
        return None
    path, identity = entry
    try:
        if not path.is_file():              # (a FIFO would block the read)
            return None
        data = path.read_bytes()
    except OSError:
        return None
    head = _CACHE_MAGIC + len(identity).to_bytes(4, "little") + identity
    digest, code = data[len(head):len(head) + 32], data[len(head) + 32:]
    if not data.startswith(head) or hashlib.sha256(code).digest() != digest:
        return None
    with contextlib.suppress(OSError):
        os.utime(path)                      # used now: the last the size limit removes
    return code


def _cache_save(entry: tuple[Path, bytes] | None, code: bytes) -> None:
    """Write ``code`` for ``entry`` through a temporary file renamed over it (a reader never
    sees half a file); a cache that cannot be written is skipped silently (the kernel is
    compiled, only not kept)."""
    if entry is None:
        return
    path, identity = entry
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(_CACHE_MAGIC + len(identity).to_bytes(4, "little") + identity
                        + hashlib.sha256(code).digest() + code)
        os.replace(tmp, path)
        CACHE_STATS["written"] += 1
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return
    _cache_trim(path.parent, path)


def _after_fork_in_child() -> None:
    """A child forked while another thread traced or compiled (``perfsim.fastpath`` compiles
    in a background thread) would inherit the lock held forever: it gets fresh locks (the
    compiled kernels stay valid: the fork copied them)."""
    global _TRACE_LOCK, _COMPILE_LOCK, _POOL
    _TRACE_LOCK, _COMPILE_LOCK, _POOL = threading.Lock(), threading.Lock(), None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
_TARGET = None


def _target_machine():
    """A new target machine for this CPU. One per kernel: the MCJIT engine a kernel is
    compiled into takes ownership of its target machine and frees it with itself, so a
    machine shared by several engines was freed under the others when one was dropped (an
    interrupted compile: the next compile crashed)."""
    global _TARGET
    import llvmlite.binding as llvm
    if _TARGET is None:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        # this CPU's instruction set (SSE4.1's rounding, AVX, FMA contraction stays off:
        # LLVM does not fuse without fast-math flags, so results stay numpy's)
        _TARGET = (llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten())
    cpu, features = _TARGET
    return llvm.Target.from_default_triple().create_target_machine(
        cpu=cpu, features=features, opt=2)


def _primitive_address(name: str, arity: int) -> int:
    """Address of the scalar twin ``name`` compiled by numba as a C function of int64s."""
    cfunc = _PRIMITIVE_FUNCS.get((name, arity))
    if cfunc is None:
        import numba
        cfunc = numba.cfunc(numba.int64(*([numba.int64] * arity)),
                            cache=True)(_PRIMITIVES[name])
        _PRIMITIVE_FUNCS[name, arity] = cfunc    # kept alive: the JIT calls its address
    return cfunc.address


_PRIMITIVE_FUNCS: dict = {}


def primitive_addresses(program: Program) -> dict:
    """``symbol -> address`` of the scalar twins ``program`` calls, compiled by numba where
    not yet (Python work: numba's pipeline; :func:`kernel_of`'s LLVM work runs outside the
    GIL, so a caller that compiles in another thread does this part itself)."""
    return {symbol: _primitive_address(name, arity)
            for symbol, (name, arity) in program.primitives.items()}


def kernel_of(program: Program, vectorize: bool = True):
    """The compiled kernel of ``program`` (a ctypes function; compiled once per process and
    ``vectorize``, 0.3-1 s on the development machine). ``vectorize``: let LLVM vectorise
    the row loop (sweeps' blocks); ``perfsim.fastpath``'s one-row calls skip it, which
    compiles faster."""
    import ctypes

    key = (program.key, vectorize)
    with _COMPILE_LOCK:
        found = _COMPILED.get(key)
        if found is not None:
            return found[0]
        import llvmlite.binding as llvm
        machine = _target_machine()
        for symbol, address in primitive_addresses(program).items():
            llvm.add_symbol(symbol, address)
        module = llvm.parse_assembly(program.ir_text)
        module.verify()
        entry = _cache_entry(program.key, vectorize)
        cached = _cache_load(entry)
        if cached is None:
            tuning = llvm.create_pipeline_tuning_options(speed_level=2)
            # the row loop vectorises (noalias pointers, no ``pow`` call in the model's
            # per-row work, the inner loop over a block's (batch, heads) pairs): 2-2.5x fewer
            # ns per row on the development machine (AVX-512) than the scalar loop
            tuning.loop_vectorization = vectorize
            builder = llvm.create_pass_builder(machine, tuning)
            builder.getModulePassManager().run(module, builder)
        engine = llvm.create_mcjit_compiler(module, machine)
        made: list[bytes] = []
        # MCJIT asks the cache before it generates code and hands over what it generated
        engine.set_object_cache(lambda _module, code: made.append(bytes(code)),
                                lambda _module: cached)
        engine.finalize_object()
        if cached is not None:
            CACHE_STATS["loaded"] += 1
        elif made:
            _cache_save(entry, made[0])
        fn = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), *[ctypes.c_int64] * 5)(
            engine.get_function_address("kernel"))
        _COMPILED[key] = (fn, engine)
        STATS["kernels"] += 1
        return fn


def threads() -> int:
    """Threads a compiled block may run on: ``PERFSIM_THREADS``, else the CPUs this process
    may use. :func:`run` uses at most one per 8192 rows of the block (a sweep's blocks of
    32 Ki rows: at most 4) and one per sequence length of the block.

    Raises:
        perfsim.PerfsimError: ``PERFSIM_THREADS`` set to anything but a whole number >= 1."""
    given = os.environ.get("PERFSIM_THREADS", "").strip()
    if given:
        try:
            count = int(given)
        except ValueError:
            count = 0
        if count < 1:
            from perfsim.errors import PerfsimError
            raise PerfsimError(f"PERFSIM_THREADS={given!r}: give a whole number of threads, "
                               "at least 1 (unset: the CPUs this process may use)")
        return count
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:                # not Linux
        return max(1, os.cpu_count() or 1)


#: Counters of this process: rows evaluated by compiled kernels, blocks a guard sent back to
#: numpy, kernels compiled.
STATS = {"rows": 0, "guard_failures": 0, "kernels": 0}

_POOL: ThreadPoolExecutor | None = None
#: Rows under which a block runs on one thread (the hand-off costs more).
_PARALLEL_ROWS = 8192


def run(program: Program, inputs: dict, shape: tuple | None = None,
        codes: dict | None = None, into: dict | None = None) -> dict | None:
    """Evaluate ``program`` on a block: ``inputs`` maps each input name to a one-dimensional
    array along its axis (:attr:`Program.axes`) of the block ``shape = (n0, n1, n2)``
    (default: a flat list of rows, every input of one length along axis 0, the kernel's
    inner loop). Returns ``name -> array, number or None``, or None where a row fails a
    guard (the caller evaluates the block with numpy); an array is flat for a flat list of
    rows, else of the block's shape (a strided view of the kernel's length-major column).
    ``codes``: ``name -> {label: code}`` for label outputs wanted as int8 codes (a label not
    listed: 0) instead of strings. ``into``: ``name -> array`` of the block's shape (flat
    for a flat list), C-contiguous: where a numeric output has that array's dtype, it is
    written there (the caller's result table, which then needs no copy of its own) and
    comes back as that array, in C order — the kernel writes it there directly where its
    length-major order is C order (a flat list, one length or one pair), else each thread
    copies its lengths there once its rows are done; an output of another dtype is returned
    as without ``into``. Where a row fails a guard the arrays hold partial values and None
    is returned, as without ``into``.

    Threads (:func:`threads`, at most one per :data:`_PARALLEL_ROWS` rows): each takes a
    range of the sequence lengths (axis 2), or, in a block of one length (a flat list
    included), a range of the (batch, heads) pairs."""
    import ctypes

    global _POOL
    fn = kernel_of(program)
    arrays = []
    for name in program.inputs:
        a = np.asarray(inputs[name]).ravel()
        arrays.append(np.ascontiguousarray(a, dtype=np.int64) if a.dtype.kind in "iu"
                      else np.ascontiguousarray(a))
    flat = shape is None
    if flat:
        shape = tuple(len(arrays[0]) if a == 0 else 1 for a in range(3))
    n0, n1, n2 = shape
    for name, a in zip(program.inputs, arrays):
        if len(a) != shape[program.axes[name]]:
            raise ValueError(f"input {name!r}: {len(a)} values along axis "
                             f"{program.axes[name]} of a {shape} block")
    # the kernel's inner loop runs over the (batch, heads) pairs of the block, batch-major:
    # an input along axis 0 or 1 is read at the pair's index
    arrays = [a if program.axes[name] == 2 or n0 * n1 == len(a) else
              np.repeat(a, n1) if program.axes[name] == 0 else np.tile(a, n0)
              for name, a in zip(program.inputs, arrays)]
    pairs = n0 * n1
    n = pairs * n2
    in_place = flat or pairs == 1 or n2 == 1       # the kernel's order is C order
    outs = [None] * program.n_slots
    targets = {}                # slot -> the caller's array the column goes to
    for name, (kind, detail) in program.plan.items():
        if kind == "row":
            slot, dtype, labels = detail
            target = None if into is None or labels is not None else into.get(name)
            if target is not None and target.dtype != dtype:
                target = None                   # (e.g. int64 counts for a float column)
            if target is not None:
                if target.size != n or not target.flags.c_contiguous:
                    raise ValueError(f"into[{name!r}]: {target.shape}, not C-contiguous "
                                     f"{n} rows")
                targets[slot] = target
            outs[slot] = (target.reshape(-1) if target is not None and in_place
                          else np.empty(n, dtype=dtype))
    ok = np.ones(1, dtype=np.uint8)
    floats = program.floats if len(program.floats) else np.zeros(1)
    ints = program.ints if len(program.ints) else np.zeros(1, dtype=np.int64)
    keep = [*arrays, floats, ints, *outs, ok]
    by_pairs = n2 == 1                      # one length: the threads split the pairs
    workers = min(threads(), pairs if by_pairs else n2, max(1, n // _PARALLEL_ROWS))
    calls = []
    if n == 0:
        pass                                # an empty block: empty columns, no call
    elif by_pairs:
        cuts = np.linspace(0, pairs, workers + 1).astype(np.int64)
        per_pair = [program.axes[name] != 2 for name in program.inputs] + [False, False] + [
            True] * len(outs) + [False]     # inputs along axis 0 or 1, and the columns
        for lo, hi in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
            # the pairs lo..hi as a block of their own (the per-pair arrays from pair lo on)
            part = [a[lo:hi] if sliced else a for a, sliced in zip(keep, per_pair)]
            calls.append(((ctypes.c_void_p * len(part))(*(a.ctypes.data for a in part)),
                          0, 1, hi - lo, 1, 1))
    else:
        pointers = (ctypes.c_void_p * len(keep))(*(a.ctypes.data for a in keep))
        cuts = np.linspace(0, n2, workers + 1).astype(np.int64)
        calls = [(pointers, lo, hi, n0, n1, n2)
                 for lo, hi in zip(cuts[:-1].tolist(), cuts[1:].tolist())]
    work = fn
    if targets and not in_place:
        def work(pointers, lo, hi, *sizes):
            # this thread's lengths lo..hi, from the kernel's length-major column to the
            # caller's C-order array (numpy's copy runs outside the GIL)
            fn(pointers, lo, hi, *sizes)
            for slot, target in targets.items():
                np.copyto(target.reshape(n0, n1, n2)[:, :, lo:hi],
                          outs[slot].reshape(n2, pairs)[lo:hi].T.reshape(n0, n1, hi - lo))
    if len(calls) == 1:
        work(*calls[0])
    elif calls:
        if _POOL is None or _POOL._max_workers < workers:
            _POOL = ThreadPoolExecutor(workers, thread_name_prefix="perfsim-compiled")
        futures = [_POOL.submit(work, *call) for call in calls]
        # every thread done before ``keep``'s arrays can be freed, even on Ctrl-C (once or
        # more); then a thread's exception, if any
        _wait_through_interrupts(futures)
        for future in futures:
            future.result()
    if not ok[0]:
        STATS["guard_failures"] += 1
        return None
    STATS["rows"] += n
    results = {}
    for name, (kind, detail) in program.plan.items():
        if kind == "none":
            results[name] = None
        elif kind == "const":
            # (a label the same on every row: a code too where codes are asked for)
            results[name] = (np.int8(codes[name].get(detail, 0)) if isinstance(detail, str)
                             and codes is not None and name in codes else detail)
        else:
            slot, _, labels = detail
            if slot in targets:
                results[name] = targets[slot]
                continue
            # written length-major: the block's (n0, n1, n2) as a view (copied once, by
            # the caller that stores it)
            column = outs[slot] if in_place else (
                outs[slot].reshape(n2, pairs).T.reshape(n0, n1, n2))
            if not flat and column.ndim == 1:
                column = column.reshape(n0, n1, n2)
            if labels is not None and codes is not None and name in codes:
                table = np.array([codes[name].get(label, 0) for label in labels], np.int8)
                results[name] = table[column]
            else:
                results[name] = column if labels is None else np.array(labels)[column]
    return results


def _wait_through_interrupts(futures) -> None:
    """Wait until every future is done, whatever interrupts arrive meanwhile (Ctrl-C, or the
    CLI's SIGTERM exception: anything a signal handler raises); the first is raised again
    once they are."""
    interrupted = None
    while True:
        try:
            concurrent.futures.wait(futures)
            break
        except BaseException as exc:    # noqa: BLE001 - re-raised below, after the wait
            interrupted = interrupted or exc
    if interrupted is not None:
        raise interrupted


def same(compiled: dict, reference: dict, rtol: float = CHECK_RTOL) -> str | None:
    """None where ``compiled`` matches numpy's ``reference`` output by output (broadcast to
    one shape; floats to ``rtol``, NaN where NaN; integers, booleans and labels exactly),
    else what differs."""
    for name, ref in reference.items():
        got = compiled.get(name)
        if ref is None or got is None:
            if ref is not got:
                return f"{name}: {got!r} against {ref!r}"
            continue
        ref, got = np.asarray(ref), np.asarray(got)
        shape = np.broadcast_shapes(ref.shape, got.shape)
        ref, got = np.broadcast_to(ref, shape), np.broadcast_to(got, shape)
        if ref.dtype.kind in "fc" or got.dtype.kind in "fc":
            r, g = ref.astype(float), got.astype(float)
            nan = np.isnan(r)
            if not np.array_equal(nan, np.isnan(g)):
                return f"{name}: NaN in different rows"
            scale = np.maximum(np.abs(r), np.finfo(float).tiny)
            with np.errstate(invalid="ignore", over="ignore"):    # inf - inf where equal
                diff = np.where(nan | (r == g), 0.0, np.abs(g - r) / scale)
            if diff.size and diff.max() > rtol:
                return f"{name}: relative difference {diff.max():.3g}"
        elif not np.array_equal(ref, got):
            return f"{name}: values differ"
    return None


def warn_disagree(what: str, detail: str) -> None:
    """A ``RuntimeWarning`` that ``what``'s compiled kernel disagrees with numpy and is not
    used."""
    warnings.warn(f"perfsim.compiled: the compiled kernel of {what} disagrees with numpy "
                  f"({detail}); its rows are evaluated with numpy. Please report this.",
                  RuntimeWarning, stacklevel=outside_perfsim())


def warn_failed(what: str, exc: BaseException) -> None:
    """A ``RuntimeWarning`` that ``what``'s kernel could not be built or run, and why."""
    text = " ".join(str(exc).split())          # one line (LLVM's verifier writes several)
    warnings.warn(f"perfsim.compiled: the compiled kernel of {what} failed "
                  f"({type(exc).__name__}: {text}); its rows are evaluated with numpy. "
                  "Please report this.", RuntimeWarning, stacklevel=outside_perfsim())
