"""Attention kernels that mirror perfsim's algorithm models, one module per algorithm.

Every module has the same small interface (see README.md here):

* ``forward(q, k, v, *, causal, sm_scale=None, **config) -> (o, lse_or_stats)``
* ``launch_config(batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, *, causal, dtype,
  phase, **config) -> dict``: the tiles, warps, stages and grid the kernel launches
* ``backward(...)`` and a differentiable ``attention(...)`` where implemented (standard, fa2)

Nothing here imports torch or triton until a kernel module is loaded; :mod:`.configs` and
:mod:`._common` are pure Python.
"""

import importlib

#: Algorithm names, in the order the FlashAttention papers introduced them.
ALGORITHMS = ("standard", "fa1", "fa2", "fa3", "fa4")


def load(algorithm: str):
    """Import and return the kernel module for ``algorithm`` (one of :data:`ALGORITHMS`).

    Raises:
        ValueError: for an unknown name.
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; expected one of {ALGORITHMS}")
    return importlib.import_module(f"{__name__}.{algorithm}")
