"""Arithmetic that works the same on Python ints, numpy arrays and sympy expressions.

Every count formula in perfsim is written once with these helpers, so ``predict`` (ints),
``sweep`` (numpy arrays) and ``symbolic`` (sympy symbols) evaluate the *same* code
(STYLE.md: "write each count formula once").
"""

from __future__ import annotations

import functools
import sys

import numpy as np

#: Types that are never symbolic and take the plain-Python branch of every helper (a fast
#: path for ``predict``: no sympy check, no numpy dispatch; same results as before: numpy
#: scalars took the final ``min``/``max``/``//`` branch already).
_PLAIN = frozenset((int, float, bool, np.float64, np.int64))


#: ``B·H·N_q·N_k·(d + d_v)`` from which rows are counted with float64 sizes (2⁻⁵³ relative
#: error) so that no count, a few hundred times that product at most, overflows int64
#: (``perfsim.sweep``'s blocks, ``perfsim.fastpath``'s traced rows).
INT64_SAFE = 2.0 ** 53


def is_symbolic(*values) -> bool:
    """Whether any argument is a sympy expression."""
    # sympy is imported lazily (``import perfsim`` does not need it): while it is not
    # imported, no value can be a sympy expression.
    sympy = sys.modules.get("sympy")
    if sympy is None:
        return False
    basic = getattr(sympy, "Basic", None)
    if basic is None:       # sympy still importing: no expression exists yet
        return False
    for v in values:
        if type(v) not in _PLAIN and isinstance(v, basic):
            return True
    return False


def cdiv(a, b):
    """Ceiling division ``⌈a / b⌉`` for non-negative integers (or a sympy ``ceiling``)."""
    if type(a) in _PLAIN and type(b) in _PLAIN:
        return -(-a // b)
    if is_symbolic(a, b):
        import sympy
        return sympy.ceiling(sympy.Integer(1) * a / b)
    return -(-a // b)


def fdiv(a, b):
    """Floor division ``⌊a / b⌋``."""
    if type(a) in _PLAIN and type(b) in _PLAIN:
        return a // b
    if is_symbolic(a, b):
        import sympy
        return sympy.floor(sympy.Integer(1) * a / b)
    return a // b


def minimum(a, b):
    """``min`` for numbers, numpy arrays (elementwise) and sympy expressions."""
    if type(a) in _PLAIN and type(b) in _PLAIN:
        return min(a, b)
    if is_symbolic(a, b):
        import sympy
        return sympy.Min(a, b)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.minimum(a, b)
    return min(a, b)


def maximum(a, b):
    """``max`` for numbers, numpy arrays (elementwise) and sympy expressions."""
    if type(a) in _PLAIN and type(b) in _PLAIN:
        return max(a, b)
    if is_symbolic(a, b):
        import sympy
        return sympy.Max(a, b)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.maximum(a, b)
    return max(a, b)


def asarray(x, dtype=None):
    """``np.asarray(x, dtype)`` that keeps an ndarray subclass (``np.asanyarray``) and
    converts with ``astype``: the same values, and a traced array
    (``perfsim.compiled``) stays traced."""
    a = np.asanyarray(x)
    return a if dtype is None or a.dtype == np.dtype(dtype) else a.astype(dtype)


def elementwise(scalar_fn):
    """Mark an array function as the vectorised form of ``scalar_fn`` (same arguments, one
    element each; for a loop whose trip count depends on the values). Called with an
    argument whose type has a ``_perfsim_call`` hook (``perfsim.compiled``'s traced arrays),
    the hook records one call of ``scalar_fn`` per row instead of running the array code."""
    def decorate(array_fn):
        @functools.wraps(array_fn)
        def wrapper(*args):
            for arg in args:
                hook = getattr(type(arg), "_perfsim_call", None)
                if hook is not None:
                    return hook(array_fn, scalar_fn, args)
            return array_fn(*args)
        wrapper.scalar = scalar_fn
        return wrapper
    return decorate


def shortcut_all(test) -> bool:
    """Whether every element of ``test`` is true, asked only to skip work whose result would
    be the same either way (a plain ``bool`` as it is, an array reduced). An array type with
    ``_perfsim_general_path`` set (``perfsim.compiled``'s traced arrays, which must record
    code that holds for any rows) answers False: the general path."""
    if type(test) is bool:
        return test
    if getattr(type(test), "_perfsim_general_path", False):
        return False
    return bool(np.all(test))


def shortcut_none(test) -> bool:
    """Whether no element of ``test`` is true, asked only to skip work whose result would be
    the same either way (as :func:`shortcut_all`; a traced array answers False)."""
    if type(test) is bool:
        return not test
    if getattr(type(test), "_perfsim_general_path", False):
        return False
    return not bool(np.any(test))


def one_value(x):
    """The value every element of the integer array ``x`` holds, as an ``int``, or None
    where the elements differ. A traced array (``perfsim.compiled``, type attribute
    ``_perfsim_general_path``) answers its sampled value and records a guard that every row
    holds it (``item()``)."""
    if getattr(type(x), "_perfsim_general_path", False):
        return int(x.item())
    values = np.unique(np.asarray(x))
    return int(values[0]) if len(values) == 1 else None


def take(table, index):
    """``np.asarray(table)[index]``: a constant table read at integer indices (numpy arrays
    elementwise); an index type with a ``_perfsim_take`` hook (``perfsim.compiled``'s traced
    arrays) reads it itself."""
    hook = getattr(type(index), "_perfsim_take", None)
    if hook is not None:
        return hook(table, index)
    return np.asarray(table)[index]


def where(cond, a, b):
    """``a`` where ``cond`` else ``b`` (sympy: ``Piecewise``)."""
    if is_symbolic(cond, a, b):
        import sympy
        return sympy.Piecewise((a, cond), (b, True))
    if isinstance(cond, np.ndarray):
        return np.where(cond, a, b)
    return a if cond else b


def log2(x):
    """``log2`` for numbers, numpy arrays and sympy expressions."""
    if is_symbolic(x):
        import sympy
        return sympy.log(x, 2)
    return np.log2(x)
