"""Exceptions raised by perfsim.

Every error perfsim raises for bad input derives from :class:`PerfsimError` (itself a
``ValueError``), so callers and the CLI can catch one type and print one line.
"""


class PerfsimError(ValueError):
    """Bad input: the message says what is wrong and what is allowed."""


class InfeasibleError(PerfsimError):
    """An algorithm configuration cannot run on this workload/GPU (the message says why).

    Examples: a tile that needs more shared memory than one CTA may have, a head dimension the
    reference implementation does not support, or a GPU without a feature (TMA, WGMMA,
    tcgen05) that the algorithm needs.
    """
