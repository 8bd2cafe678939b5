"""Arithmetic that works the same on Python ints, numpy arrays and sympy expressions.

Every count formula in perfsim is written once with these helpers, so ``predict`` (ints),
``sweep`` (numpy arrays) and ``symbolic`` (sympy symbols) evaluate the *same* code
(STYLE.md: "write each count formula once").
"""

from __future__ import annotations

import numpy as np
import sympy


def is_symbolic(*values) -> bool:
    return any(isinstance(v, sympy.Basic) for v in values)


def cdiv(a, b):
    """Ceiling division ``⌈a / b⌉`` for non-negative integers (or a sympy ``ceiling``)."""
    if is_symbolic(a, b):
        return sympy.ceiling(sympy.Integer(1) * a / b)
    return -(-a // b)


def fdiv(a, b):
    """Floor division ``⌊a / b⌋``."""
    if is_symbolic(a, b):
        return sympy.floor(sympy.Integer(1) * a / b)
    return a // b


def minimum(a, b):
    if is_symbolic(a, b):
        return sympy.Min(a, b)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.minimum(a, b)
    return min(a, b)


def maximum(a, b):
    if is_symbolic(a, b):
        return sympy.Max(a, b)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.maximum(a, b)
    return max(a, b)


def where(cond, a, b):
    """``a`` where ``cond`` else ``b`` (sympy: ``Piecewise``)."""
    if is_symbolic(cond, a, b):
        return sympy.Piecewise((a, cond), (b, True))
    if isinstance(cond, np.ndarray):
        return np.where(cond, a, b)
    return a if cond else b


def log2(x):
    if is_symbolic(x):
        return sympy.log(x, 2)
    return np.log2(x)
