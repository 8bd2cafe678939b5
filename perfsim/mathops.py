"""Arithmetic that works the same on Python ints, numpy arrays and sympy expressions.

Every count formula in perfsim is written once with these helpers, so ``predict`` (ints),
``sweep`` (numpy arrays) and ``symbolic`` (sympy symbols) evaluate the *same* code
(STYLE.md: "write each count formula once").
"""

from __future__ import annotations

import sys

import numpy as np

#: Types that are never symbolic and take the plain-Python branch of every helper (a fast
#: path for ``predict``: no sympy check, no numpy dispatch; same results as before: numpy
#: scalars took the final ``min``/``max``/``//`` branch already).
_PLAIN = frozenset((int, float, bool, np.float64, np.int64))


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
