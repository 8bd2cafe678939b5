"""Numbers with a unit for people: an SI (or binary) prefix and three significant digits.

Shared by the CLI's tables (``perfsim.cli``) and ``Prediction.explain``.
"""

from __future__ import annotations

_PREFIXES = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"),
             (1.0, ""), (1e-3, "m"), (1e-6, "µ"), (1e-9, "n"), (1e-12, "p"), (1e-15, "f"))


def si(value: float, unit: str, binary: bool = False) -> str:
    """``value`` with an SI prefix chosen for it and three significant digits, e.g.
    ``si(2.42e-5, "s")`` → ``"24.2 µs"``, ``si(3.38e10, "B")`` → ``"33.8 GB"``; ``binary``
    uses powers of 1024 (``"1.51 GiB"``). Zero prints as ``"0 <unit>"``."""
    if value == 0:
        return f"0 {unit}"
    if binary:
        # from 1000 of a prefix the next one (1000 MiB: "0.977 GiB"), so three digits at
        # most; past the largest, digits with separators rather than an exponent
        for scale, prefix in ((2**40, "Ti"), (2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki")):
            if abs(value) >= scale * 999.5 / 1024:
                v = value / scale
                return (f"{v:,.0f} {prefix}{unit}" if abs(v) >= 999.5
                        else f"{v:.3g} {prefix}{unit}")
        return f"{value:.3g} {unit}"
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale * 0.9995:
            v = value / scale
            return f"{v:,.0f} {prefix}{unit}" if abs(v) >= 999.5 else f"{v:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def seconds_text(value: float) -> str:
    """A time for a table: an SI prefix and three significant digits below one second
    (``"24.2 µs"``, ``"7.57 ms"``), seconds from there (``"7.57 s"``, ``"603 s"``), whole
    seconds with thousands separators from 1000 s (``"602,905 s"``) — never a prefix above
    the unit (``"5.24 Ms"`` reads as milliseconds)."""
    v = float(value)
    if abs(v) >= 999.5:         # (.3g would print 999.6 as "1e+03")
        return f"{v:,.0f} s"
    if abs(v) >= 1:
        return f"{v:.3g} s"
    return si(v, "s")


def tflops_text(value: float) -> str:
    """TFLOP/s for a table: one decimal from 0.1 up (``"412.3"``), three significant digits
    below it (``"0.00412"``), so a tiny call's rate never reads ``"0.0"``."""
    return f"{value:.1f}" if value >= 0.1 else f"{value:.3g}"
