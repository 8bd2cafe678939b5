"""Ceilings of the eager PyTorch ops that standard attention is made of (for ``calibrate``).

Measured on standalone tensors, not inside attention: the bandwidth ``torch.softmax`` reaches
along rows of several lengths (PyTorch picks a different kernel by row length) and the
bandwidth of an in-place ``masked_fill_`` with a broadcast ``[N, N]`` bool mask (a
non-vectorised elementwise kernel). ``TimingParams.for_gpu`` turns them into efficiencies
relative to the profile's HBM copy bandwidth for the standard model's softmax and mask kernels.
"""

from __future__ import annotations

from perfsim.validate.microbench import Measurement, _median_s

#: Softmax row lengths measured (the validation grid's sequence lengths and beyond).
SOFTMAX_ROW_LENGTHS = (128, 512, 1024, 2048, 4096, 8192, 16384)
#: Elements of each test tensor: 2^28 bf16 = 512 MiB, several times the L2.
ELEMENTS = 1 << 28
#: Broadcast-mask test: [heads, N, N] bf16 with an [N, N] mask.
FILL_N, FILL_HEADS = 4096, 16


def softmax(row_length: int) -> Measurement:
    """Bytes read + written per second by ``torch.softmax(x, -1)`` on bf16 rows."""
    import torch

    x = torch.randn(ELEMENTS // row_length, row_length, device="cuda", dtype=torch.bfloat16)
    t = _median_s(lambda: torch.softmax(x, dim=-1))
    return Measurement(f"eager_softmax_{row_length}", 2 * x.numel() * x.element_size() / t,
                       "B/s", f"torch.softmax over {x.shape[0]} bf16 rows of {row_length}, "
                       "random normal; (read + write bytes) / do_bench median")


def broadcast_fill() -> Measurement:
    """Bytes per second of ``S.masked_fill_(mask, -inf)`` with a broadcast [N, N] mask."""
    import torch

    s = torch.randn(FILL_HEADS, FILL_N, FILL_N, device="cuda", dtype=torch.bfloat16)
    mask = torch.ones(FILL_N, FILL_N, device="cuda", dtype=torch.bool).triu(1)
    t = _median_s(lambda: s.masked_fill_(mask, float("-inf")))
    nbytes = 2 * s.numel() * s.element_size() + mask.numel()
    return Measurement("eager_broadcast_fill", nbytes / t, "B/s",
                       f"in-place masked_fill_ of a [{FILL_HEADS}, {FILL_N}, {FILL_N}] bf16 "
                       f"tensor with an [{FILL_N}, {FILL_N}] bool mask; (S read + written + "
                       "mask once) / do_bench median")


def jobs() -> list[tuple]:
    """``(name, callable)`` pairs for ``microbench.run_all``."""
    out = [(f"eager_softmax_{n}", lambda n=n: softmax(n)) for n in SOFTMAX_ROW_LENGTHS]
    return out + [("eager_broadcast_fill", broadcast_fill)]
