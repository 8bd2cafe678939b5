"""Exceptions raised by perfsim.

Every error perfsim raises for bad input derives from :class:`PerfsimError` (itself a
``ValueError``), so callers and the CLI can catch one type and print one line.
"""

import math
import os
import sys


class PerfsimError(ValueError):
    """Bad input: the message says what is wrong and what is allowed."""


class InfeasibleError(PerfsimError):
    """An algorithm configuration cannot run on this workload/GPU (the message says why).

    Examples: a tile that needs more shared memory than one CTA may have, a head dimension the
    reference implementation does not support, or a GPU without a feature (TMA, WGMMA,
    tcgen05) that the algorithm needs.
    """


def short_repr(value) -> str:
    """``repr(value)`` for an error message, shortened to 60 characters; a huge integer as its
    number of digits (``repr`` of an integer past 4300 digits raises, and 10**400 fills a
    screen)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**15:
        sign = "a negative" if value < 0 else "an"
        digits = int(abs(value).bit_length() * math.log10(2)) + 1   # str() fails past 4300
        return f"{sign} integer of about {digits} digits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def closest(word: str, choices):
    """The one of ``choices`` closest to ``word`` (``difflib``, case, ``_`` and ``-``
    ignored), or ``None`` when none is close: for "did you mean" hints."""
    import difflib

    def norm(text):
        return str(text).lower().replace("_", "-").strip()

    by_norm = {norm(c): c for c in choices}
    close = difflib.get_close_matches(norm(word), list(by_norm), n=1, cutoff=0.75)
    return by_norm[close[0]] if close else None


def did_you_mean(word: str, choices) -> str:
    """``" (did you mean 'x'?)"`` naming :func:`closest`, or ``""``."""
    close = closest(word, choices)
    return f" (did you mean {close!r}?)" if close is not None else ""


class Immutable:
    """Mixin of perfsim's frozen pydantic models (``AttentionWorkload``, ``GPUSpec``): setting
    or deleting a field raises :class:`PerfsimError` naming ``replace`` (pydantic's own error
    is a raw ``ValidationError``). ``REPLACE_AS``: the variable name the message uses."""

    REPLACE_AS = "obj"

    def __setattr__(self, name, value):
        fields = getattr(type(self), "model_fields", None)
        if fields is not None and name not in fields:
            raise PerfsimError(f"{type(self).__name__} has no field {name!r} (and its fields "
                               f"cannot be set: {self.REPLACE_AS}.replace(...) gives a changed "
                               f"copy); fields: {', '.join(fields)}")
        raise PerfsimError(f"{type(self).__name__} is immutable: {name} cannot be set; "
                           f"{self.REPLACE_AS}.replace({name}=...) gives a changed copy")

    def __delattr__(self, name):
        raise PerfsimError(f"{type(self).__name__} is immutable: {name} cannot be deleted")


def outside_perfsim() -> int:
    """``warnings.warn``'s ``stacklevel`` for the caller of this function's caller that names
    the first frame outside the perfsim package: the user's ``perfsim.sweep(...)`` line rather
    than a line of ``perfsim/sweep.py`` (the depth varies: streamed sweeps, Dask partitions)."""
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(2), 2      # stacklevel 2: the warning function's caller
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level
