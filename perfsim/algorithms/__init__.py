"""Attention algorithms: one module per algorithm, all with the same interface
(:class:`perfsim.algorithms.base.Algorithm`).

``perfsim.algorithms.FA2(block_m=128, block_n=64)`` is a configured algorithm; a string name
(``"fa2"``) means its defaults.
"""

from __future__ import annotations

from perfsim.algorithms.base import Algorithm, Dims
from perfsim.algorithms.fa1 import FA1
from perfsim.algorithms.fa2 import FA2
from perfsim.algorithms.fa3 import FA3
from perfsim.algorithms.fa4 import FA4
from perfsim.algorithms.standard import Standard
from perfsim.errors import PerfsimError

REGISTRY: dict[str, type[Algorithm]] = {cls.name: cls for cls in (Standard, FA1, FA2, FA3, FA4)}
#: The default configuration of each algorithm class, built (validated) once: a name passed to
#: ``predict`` means these defaults, and the configs are frozen with plain-valued options.
#: Keyed by the class, so a class registered under a name later gets its own.
_DEFAULT_CONFIGS: dict[type[Algorithm], Algorithm] = {}


def names() -> list[str]:
    """Algorithm names, in generation order."""
    return list(REGISTRY)


def resolve(algorithm: str | Algorithm) -> Algorithm:
    """An algorithm config from a name (defaults) or a config (returned as is). Names of
    implementation presets (``"sdpa-flash"``) are resolved one level up, by
    :func:`perfsim.implementations.resolve`, which also takes these.

    Raises:
        perfsim.PerfsimError: unknown name (the message lists the known ones).
    """
    if isinstance(algorithm, Algorithm):
        return algorithm
    key = str(algorithm).lower()
    if key not in REGISTRY:
        raise PerfsimError(f"unknown algorithm {algorithm!r}; known: {', '.join(REGISTRY)} "
                           "(implementation presets: perfsim.implementations)")
    cls = REGISTRY[key]
    config = _DEFAULT_CONFIGS.get(cls)
    if config is None:
        config = _DEFAULT_CONFIGS[cls] = cls()
    return config


__all__ = ["FA1", "FA2", "FA3", "FA4", "Algorithm", "Dims", "Standard", "names", "resolve"]
