"""Ceilings of the eager PyTorch ops that standard attention is made of (for ``calibrate``).

Measured on standalone tensors, not inside attention: the bandwidth ``torch.softmax`` reaches
along rows of several lengths (PyTorch picks a different kernel by row length), the same for
softmax's backward (``torch._softmax_backward_data``), and the
bandwidth of an in-place ``masked_fill_`` with a broadcast ``[N, N]`` bool mask (a
non-vectorised elementwise kernel). ``TimingParams.for_gpu`` turns them into efficiencies
relative to the profile's HBM copy bandwidth for the standard model's softmax and mask kernels.
"""

from __future__ import annotations

from perfsim.validate.microbench import Measurement, _median_s

#: Softmax row lengths measured (the validation grid's sequence lengths and beyond).
SOFTMAX_ROW_LENGTHS = (128, 512, 1024, 2048, 4096, 8192, 16384)
#: Row lengths between the powers of two: the ceiling is not smooth in the row length (on the
#: H200 2560-3328 reach 0.25-0.28 of copy bandwidth, 2048 and 4096 0.45 and 0.31), so the
#: calibration measures these too and the model interpolates between measured lengths.
SOFTMAX_OTHER_LENGTHS = (384, 640, 896, 1280, 1536, 2560, 3072, 3328, 5120, 6144, 10240,
                         12288)
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


def softmax_causal(row_length: int) -> Measurement:
    """Bytes read + written per second by ``torch.softmax(x, -1)`` on bf16 scores under a
    causal mask: ``[heads, N, N]`` with the strict upper triangle ``-inf`` (what eager causal
    attention feeds it after ``masked_fill``), N = ``row_length``."""
    import torch

    heads = max(1, ELEMENTS // row_length**2)
    x = torch.randn(heads, row_length, row_length, device="cuda", dtype=torch.bfloat16)
    x.masked_fill_(torch.ones(row_length, row_length, device="cuda", dtype=torch.bool)
                   .triu(1), float("-inf"))
    t = _median_s(lambda: torch.softmax(x, dim=-1))
    return Measurement(f"eager_softmax_causal_{row_length}",
                       2 * x.numel() * x.element_size() / t, "B/s",
                       f"torch.softmax over [{heads}, {row_length}, {row_length}] bf16, random "
                       "normal with the strict upper triangle -inf; (read + write bytes) / "
                       "do_bench median")


def causal_jobs() -> list[tuple]:
    """``torch.softmax`` on causally masked scores at the power-of-two row lengths and a few
    between them, each beside the unmasked rate in the same run (``probe_eager_bwd.sh``)."""
    lengths = sorted(set(SOFTMAX_ROW_LENGTHS + (768, 1536, 2560, 3072, 6144, 10240)))
    return [job for n in lengths for job in (
        (f"eager_softmax_causal_{n}", lambda n=n: softmax_causal(n)),
        (f"eager_softmax_{n}", lambda n=n: softmax(n)))]       # unmasked, same run


def softmax_backward(row_length: int) -> Measurement:
    """Bytes read + written per second by softmax's backward (``torch._softmax_backward_data``,
    what autograd runs for ``torch.softmax``) on bf16 rows: reads dP and P, writes dS."""
    import torch

    rows = ELEMENTS // row_length
    p = torch.softmax(torch.randn(rows, row_length, device="cuda", dtype=torch.bfloat16), -1)
    dp = torch.randn_like(p)
    t = _median_s(lambda: torch._softmax_backward_data(dp, p, -1, torch.bfloat16))
    return Measurement(f"eager_softmax_bwd_{row_length}", 3 * p.numel() * p.element_size() / t,
                       "B/s", f"torch._softmax_backward_data over {rows} bf16 rows of "
                       f"{row_length}, random normal grads; (2 reads + 1 write bytes) / "
                       "do_bench median")


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
    lengths = sorted(set(SOFTMAX_ROW_LENGTHS + SOFTMAX_OTHER_LENGTHS + SOFTMAX_SCAN_LENGTHS))
    out = [(f"eager_softmax_{n}", lambda n=n: softmax(n)) for n in lengths]
    return out + [("eager_broadcast_fill", broadcast_fill)]


def other_length_jobs() -> list[tuple]:
    """``torch.softmax`` at :data:`SOFTMAX_OTHER_LENGTHS`."""
    return [(f"eager_softmax_{n}", lambda n=n: softmax(n)) for n in SOFTMAX_OTHER_LENGTHS]


#: A dense scan of row lengths (every 128 up to 4096, every 512 up to 16384): PyTorch picks
#: the softmax kernel and its block size from the row length, so the ceiling moves in steps
#: that 19 sampled lengths miss (hold-out 6: 1152 and 2304 fell between them).
SOFTMAX_SCAN_LENGTHS = tuple(range(128, 4097, 128)) + tuple(range(4608, 16385, 512))


def scan_jobs() -> list[tuple]:
    """``torch.softmax`` at :data:`SOFTMAX_SCAN_LENGTHS` not already in the other lists."""
    done = set(SOFTMAX_ROW_LENGTHS) | set(SOFTMAX_OTHER_LENGTHS)
    return [(f"eager_softmax_{n}", lambda n=n: softmax(n))
            for n in SOFTMAX_SCAN_LENGTHS if n not in done]


def backward_jobs() -> list[tuple]:
    """Softmax's backward by row length (``probe_eager_bwd.sh``; not a calibration key: the
    H200 run showed two kernels at about the copy bandwidth at every row length, so the model
    needs no ceiling table for them — validate/README.md, "Eager backward")."""
    return [(f"eager_softmax_bwd_{n}", lambda n=n: softmax_backward(n))
            for n in SOFTMAX_ROW_LENGTHS]
