"""The attention kernels users call, timed forward and backward separately on a settled clock.

Implementations (one JSONL row per (shape, implementation, phase); ``impl`` names them):

* ``sdpa_flash``, ``sdpa_cudnn``, ``sdpa_efficient``, ``sdpa_math``:
  ``F.scaled_dot_product_attention`` inside ``sdpa_kernel([backend])`` (``backends.py``);
  ``enable_gqa=True`` for GQA.
* ``flex``: ``torch.compile(flex_attention, dynamic=False)`` (``backends.py``, recompile limits
  raised); run on :data:`FLEX_SUBSET` only (it compiles per shape and phase).
* ``cute``: ``flash_attn.cute.flash_attn_func`` (flash-attn-4, FA3-style kernels on sm90),
  inputs laid out (batch, seqlen, heads, head_dim); the tiles come from its
  ``_tile_size_fwd_sm90`` / ``_tile_size_bwd_sm90``.
* ``triton_tutorial``: the ``attention`` autograd Function of Triton's fused-attention tutorial
  (``python/tutorials/06-fused-attention.py``), read from ``.ext/`` (third-party, git-ignored),
  with the patches of :data:`TUTORIAL_PATCHES` and the autotuner restricted to
  :data:`TUTORIAL_CONFIGS`.

Each row (correct first, then time): fresh standard-normal inputs seeded from the
key; one call; every output element finite; relative Frobenius error against the float64
reference (``kernels/reference.py``) on the first and the last (batch, kv-head group) slice,
for the backward on dQ, dK and dV; then the op back to back for at least
:data:`WARM_S` (and at least 20 calls when a call takes over 20 ms) so the SM clock settles,
then at least :data:`MIN_CALLS` calls and :data:`MIN_TIMED_S` timed with CUDA events around
each call (median, p20, p80; L2 is *not* flushed: back-to-back calls as in training), while
:class:`perfsim.validate.nvml_sampler.NvmlSampler` samples clock and power every 5 ms. A row
is capped at about 3 s of running. The backward is ``torch.autograd.grad`` of one saved forward
with ``retain_graph=True`` (``measure.autograd_backward``).

torch, triton, pynvml and flash_attn are imported inside functions.
"""

from __future__ import annotations

import json
import math
import os
import time
import zlib
from pathlib import Path

from perfsim.validate.shapes import TOKENS_PER_CALL, Shape

#: Implementation names in per-shape measuring order (the late ones after all others).
MAIN_IMPLS = ("cute", "sdpa_cudnn", "sdpa_flash", "triton_tutorial", "sdpa_efficient")
LATE_IMPLS = ("sdpa_math", "flex")
#: Eager PyTorch attention (matmul, scale, masked_fill, softmax, matmul: the ``standard``
#: kernel of validate/kernels, what the ``eager`` preset models); measured only when asked
#: for (``--impls eager``), after the rest.
EXTRA_IMPLS = ("eager",)
DEFAULT_IMPLS = MAIN_IMPLS + LATE_IMPLS
IMPLS = DEFAULT_IMPLS + EXTRA_IMPLS
PHASES = ("fwd", "bwd")
TOLERANCE = {"bf16": 2e-2, "fp16": 1e-2}
#: Timing: warm-up seconds, min warm-up calls for calls over 20 ms, timed calls and seconds,
#: caps (seconds of warm-up and of timing), max timed calls.
WARM_S, SLOW_CALL_S, SLOW_WARM_CALLS = 0.4, 0.02, 20
MIN_CALLS, MIN_TIMED_S = 25, 0.25
MAX_WARM_S, MAX_TIMED_S, MIN_CALLS_SLOW, MAX_CALLS = 1.2, 1.2, 5, 20000
#: ``PERFSIM_EXT_WARM_S`` (seconds): a longer warm-up, for rows timed on the settled clock
#: (``probe_settle.py``: a capped call ticks ~1.6 % faster 0.5 s in than from 1.5 s on); the
#: committed grids use the default. Each row records its ``warmup_s``.
if os.environ.get("PERFSIM_EXT_WARM_S"):
    WARM_S = float(os.environ["PERFSIM_EXT_WARM_S"])
    MAX_WARM_S = max(MAX_WARM_S, WARM_S)
SAMPLE_PERIOD_S = 0.005
GRID_DIR = Path(__file__).parent / "grids"
EXT_DIR = Path(__file__).resolve().parent.parent / ".ext"
TUTORIAL_FILE = "triton_tutorial_attention.py"


def _tok(n, h, d, causal, **kw) -> Shape:
    return Shape(batch=TOKENS_PER_CALL // n, heads=h, seqlen_q=n, head_dim=d, causal=causal,
                 **kw)


def external_grid() -> list[Shape]:
    """The main grid (forward phase; each shape is measured in both phases), d = 128 first."""
    both = (False, True)
    d128 = [_tok(n, 16, 128, c) for n in (256, 512, 1024, 2048, 4096, 8192, 16384) for c in both]
    gqa = [_tok(n, 32, 128, c, kv_heads=8) for n in (2048, 8192) for c in both]
    fp16 = [_tok(n, 16, 128, c, dtype="fp16") for n in (2048, 8192) for c in both]
    tiny128 = [Shape(1, 16, n, 128, False) for n in (128, 512, 1024)]
    d64 = [_tok(n, 32, 64, c) for n in (256, 1024, 4096, 16384) for c in both]
    d256 = [_tok(n, 8, 256, c) for n in (256, 1024, 4096, 16384) for c in both]
    tiny64 = [Shape(1, 1, 64, 64, False)]
    return d128 + gqa + fp16 + tiny128 + d64 + d256 + tiny64


#: FlexAttention runs on these main-grid shapes only (it compiles per shape and phase).
FLEX_SUBSET = (
    [_tok(n, 16, 128, c) for n in (1024, 4096, 16384) for c in (False, True)]
    + [_tok(8192, 32, 128, c, kv_heads=8) for c in (False, True)]
    + [_tok(4096, 32, 64, c) for c in (False, True)]
    + [_tok(4096, 8, 256, c) for c in (False, True)]
)


#: Hold-out grids, each measured after the model was frozen for the mechanisms named (JSON
#: files of Shape fields in ``grids/``; none shares a shape with the main grid or an earlier
#: hold-out).
HOLDOUTS = {
    "external-holdout": "never measured with the main grid",
    "external-holdout2": "frozen for the Nsight Compute mechanisms (tensor-core clock "
                         "ceiling, FMA slots and ALU pipe, FA3 softmax overlap, fused dropout)",
    "external-holdout3": "most at head dim 192-256; frozen for the flash_attn.cute "
                         "head-dim-256 backward tile and cuDNN's head-dim-256 S/dP issue",
    "external-holdout4": "where the Triton backwards spill registers (tutorial at head dim "
                         "128, FlexAttention at 192-256); frozen for the spill mechanism",
    "external-holdout5": "eager PyTorch and SDPA math (fused kernels for the ranking); frozen "
                         "for eager softmax's two-kernel backward and cuBLAS SGEMM's K law",
    "external-holdout6": "sequence lengths between powers of two, head dims 64-192; frozen "
                         "for torch.softmax's ceilings there and cuBLAS SGEMM's width table",
    "external-holdout7": "half at lengths the softmax scan measured, half between; frozen for "
                         "the dense softmax-ceiling scan",
    "external-holdout8": "seven causal, eager PyTorch and SDPA math; frozen for the "
                         "softmax's measured rate on masked scores",
    "external-holdout9": "most at head dims 224-256, where flash-attn 2's backward spills; "
                         "frozen for its warp cycle without operand prefetch",
    "external-holdout10": "head dims between flash-attn 2's compiled ones (80-240); frozen "
                          "for its kernels running at the compiled head dim, head dim 160's "
                          "and PyTorch's 224 launch tables",
    "external-holdout11": "head dims 48-248, most between compiled ones; frozen for the "
                          "kernels PyTorch's copy runs there (profiled: no 160, no 224), "
                          "their spills and the 256 backward's missing prefetch",
    "external-holdout12": "head dims 56-216 between compiled ones, for FlexAttention and SDPA "
                          "flash; frozen for FlexAttention's power-of-two head dims",
    "external-holdout13": "FlexAttention at head dims its tile table does not list (80-224); "
                          "frozen for its default forward tile there",
    "external-holdout14": "short and long calls at head dims 64-256; frozen for the CTA edges, "
                          "WGMMA operands per warpgroup and the Triton kernels' CTA cycle",
    "external-holdout15": "sequence lengths a multiple of 128 beside ones that are not, "
                          "head dims 64-192; frozen for FlexAttention's forward scale "
                          "multiplies and its key bound check on every tile",
    "external-holdout16": "pairs of lengths, a multiple of 128 and not, head dims 64-192, "
                          "causal, GQA, fp16; frozen for the per-tile bound checks of "
                          "flash-attn 2's backward, cuDNN and FlexAttention's backward",
    "external-holdout17": "long tensor-bound calls at head dims 64-256, causal, GQA, fp16; "
                          "frozen for the model's clock as the one the SMs tick at (the "
                          "WGMMA GEMM rate and the tensor energies per tick)",
    "external-holdout18": "head dims between the compiled ones (88-232), most above 128; "
                          "frozen for flash_attn.cute's and flash-attn 3's compiled head "
                          "dims (cute's backward rounds 129-256 up to a multiple of 64)",
    "external-holdout19": "SDPA's memory-efficient kernel beside SDPA flash: head dims "
                          "64-160, short query blocks against long caches, fp16; frozen "
                          "for xFormers' tiles by head dim, its m16n8k8 MMAs and its "
                          "address arithmetic",
    "external-holdout20": "long and short calls at head dims 64-256 (96 and 192 between "
                          "cuDNN's compiled ones), causal, GQA, fp16; frozen for the exps "
                          "waiting on the row max (FA3-class forwards), the energy of bytes "
                          "L2 serves, the tutorial's forward tiles by head dim and cuDNN's "
                          "compiled head dims, backward tile and instruction census",
    "external-holdout21": "short and mid calls (N 256-1536) beside long ones, head dims "
                          "64-256, causal, GQA, fp16; frozen for the fp32 dQ accumulator "
                          "crossing HBM, the Triton backwards' dQ pass without one (a second "
                          "edge phase) and the tutorial's scaled copy of K",
    "external-holdout22": "short and mid calls (N 320-2560) beside long ones, head dims "
                          "64-256 (160 between compiled ones), causal, GQA, fp16; frozen "
                          "for the causal backward's in-order tail and a persistent "
                          "kernel's per-unit overhead",
    "external-holdout23": "Triton's tutorial, causal, N 256-6400 at head dims 64 and 128; "
                          "frozen for its backward's masked tiles walked in half steps "
                          "(spill reloads per step)",
    "external-holdout24": "head dims 64-256 (96 and 192 between cuDNN's compiled ones), N "
                          "192-12800, causal, GQA, fp16; frozen for cuDNN's forward tile "
                          "(128 x 128 at every head dim, from its kernel names) and its two "
                          "forward tiles in flight",
    "external-holdout25": "short and mid backward calls (N 128-1536, large batches) beside "
                          "two long ones, head dims 64-256, causal, GQA, fp16; frozen for "
                          "fp32 reductions into L2 sharing the memory path with HBM",
    "external-holdout26": "short backward calls (N 256-768, large batches), head dims 64-256, "
                          "causal, fp16, cuDNN and SDPA flash only; frozen for a persistent "
                          "backward's units each paying their whole edge",
    "external-holdout27": "Triton's tutorial beside SDPA flash, cuDNN and FlexAttention: head "
                          "dims 64-256 (powers of two), N 640-12288, causal, fp16; frozen for "
                          "the tutorial's forward launch (64 x 64, 3 K/V stages) with its "
                          "compiled registers and shared memory, and the driver's 1 KB of "
                          "shared memory reserved per CTA",
    "external-holdout28": "FlexAttention beside SDPA flash and cuDNN at head dims 8 off a "
                          "multiple of 16 (72-248, rows half a 32-byte sector off) and two "
                          "controls (112, 176), N 2048-8192 multiples of 128, causal, fp16; "
                          "frozen for the half-sector rows of its 16-byte copies",
    "external-holdout29": "small head dims never measured before (16-48: 16, 24, 32 and 40 "
                          "below any earlier grid), N 1024-8192, causal, GQA, fp16; frozen "
                          "as it stood (no model change) to test the small-head-dim tiles, "
                          "padding and load paths",
    "external-holdout30": "small head dims again (16-48), N 768-12288, causal, GQA, fp16, "
                          "new shapes; frozen for FlexAttention's compiled registers on sm_90 "
                          "(5 CTAs per SM at head dims 16-32), its head-dim-32 backward tile "
                          "and the register file handed out a warp (256 registers) at a time",
    "external-holdout31": "head dims 24-56 (mostly 40-56, between head dim 32's tile and 64's), "
                          "N 1024-8192, causal, GQA, fp16, new shapes; frozen for "
                          "FlexAttention's backward tile below head dim 64 (torch's sm_90 "
                          "rule: 64 x 64 with 4 warps, 182 registers)",
    "external-holdout32": "one to four query tokens against 2k-16k keys, forward and backward "
                          "(SDPA cuDNN and flash), head dims 64 and 128, fp16; frozen for "
                          "cuDNN's backward of one query token on the training kernels (its "
                          "decode kernel is forward-only)",
    "external-holdout33": "head dims 56-248 whose rows are 16 bytes off whole 32-byte sectors "
                          "or whose flash_attn.cute forward tile takes a 32- or 64-byte "
                          "swizzle, N 2k-8k, causal, GQA, fp16; frozen for the L2's time per "
                          "TMA row segment (GPUSpec.tma_segment_seconds)",
    "external-holdout34": "small causal grids whose busiest SM holds all its CTAs at once "
                          "(2 CTAs per SM resident, 2 per SM launched: B = 1-4, N 1k-4k, head "
                          "dims 64 and 128, GQA) and their non-causal twins; measured with "
                          "the model frozen at 5c69548 to test base.in_order_tail there",
    "external-holdout35": "small calls (B = 1-8, N 256-3072, head dims 64-128, causal, GQA, "
                          "fp16), FlexAttention beside SDPA flash, cuDNN and memory-efficient; "
                          "frozen at a0f2aeb for FlexAttention's host floors (flex.toml)",
    "external-holdout36": "head dims 160-256 (200-248 between flash_attn.cute's backward tile "
                          "widths, rows of whole 32-byte sectors and 16 bytes off), N 1k-9k, "
                          "causal, GQA, fp16; frozen for TMA row segments taking turns with "
                          "the dQ reductions in the L2 (GPUSpec.l2_reduction_segment_share)",
    "external-holdout37": "head dims 72-248 that are not a compiled kernel's (flash_attn.cute's "
                          "backward at 136-248, SDPA flash's and cuDNN's padded kernels), N "
                          "1k-7k, causal, GQA, fp16; frozen for the dQ accumulator as wide as "
                          "the compiled kernel's head dim (its zeroing, reductions and "
                          "read-back)",
    "external-holdout38": "dropout 0.1 beside the same shapes without it (head dims 64-256, "
                          "causal, GQA, fp16), SDPA flash, cuDNN, memory-efficient and math: "
                          "the model's dropout (Philox draws per score element, set from "
                          "flash-attn's source) had never been timed; measured at 6b2a341",
    "external-holdout39": "dropout 0.1-0.2 beside the same shapes without it (head dims "
                          "64-160, N 1.8k-8k, one not a multiple of 128, causal, GQA, fp16), "
                          "SDPA flash, cuDNN, memory-efficient and math; frozen for dropout "
                          "counted from each kernel family's instruction census "
                          "(softmax_costs.DROPOUT_INSTRUCTIONS)",
    "external-holdout40": "dropout 0.05-0.3 beside the same shapes without it (head dims "
                          "64-256, N 1.1k-7k, causal, GQA, fp16), SDPA flash, cuDNN, "
                          "memory-efficient and math; frozen for cuDNN's kernels running "
                          "their stations back to back with dropout (FA3.serial_stations)",
    "external-holdout41": "dropout 0.1-0.2 beside the same shapes without it (head dims "
                          "64-256, N 0.9k-8.4k, two not multiples of 128, causal, GQA, fp16), "
                          "SDPA flash, cuDNN, memory-efficient and math; frozen for cuDNN's "
                          "FMA and ALU pipes taking turns with dropout "
                          "(KernelCost.cuda_cores_in_turn) and its shared memory beside the "
                          "serial cycle",
    "external-holdout42": "dropout 0.1-0.2 beside the same shapes without it (head dims "
                          "64-256, most above 128, N 1.4k-9.2k, causal, GQA, fp16), SDPA "
                          "flash, cuDNN, memory-efficient and math; frozen for cuDNN's "
                          "register spills with dropout (CUDNN_SM90_DROPOUT_SPILL_BYTES), "
                          "one reload stream per consumer warpgroup (KernelCost.spill_streams)",
    "external-holdout43": "dropout 0.1-0.15 beside the same shapes without it, mostly causal at "
                          "head dims 176-256 (N 2.3k-6.7k, GQA, fp16), SDPA flash and cuDNN; "
                          "frozen for cuDNN's causal spill figures at head dim 256 "
                          "(CUDNN_SM90_CAUSAL_DROPOUT_SPILL_BYTES)",
    "external-holdout44": "head dims 32-256, most at 96 and below (N 1.5k-6k, causal, fp16, one "
                          "with dropout), SDPA flash, memory-efficient and cuDNN; frozen for the "
                          "mma.sync warp's FMA and ALU pipes in turn with the MUFU beside them "
                          "(base.MMA_SYNC_SERIAL) and SDPA flash's full ALU/FMA census "
                          "(softmax_costs.ADDRESS_ARITHMETIC['pytorch-flash'])",
    "external-holdout45": "head dims 64-256 (N 1.3k-12k, causal, GQA, fp16), FlexAttention, "
                          "flash_attn.cute, cuDNN and SDPA flash; frozen for the WGMMA pipe at "
                          "its whole rate (GPUSpec.tensor_sustained_fraction 1.0 on GH100) and "
                          "one Triton CTA per SM at 0.88 of it "
                          "(GPUSpec.wgmma_one_cta_fraction, KernelCost.tensor_issue_share)",
    "external-holdout46": "decode-sized calls (N_q 1-12 against N_k 6k-49k, GQA 1-12, B 1-4, "
                          "head dims 64 and 128), SDPA flash (flash-attn 2's split-KV "
                          "heuristic) and cuDNN; frozen for a split forward's cycle customers "
                          "taken from the split grid's CTAs",
    "external-holdout47": "small causal prefill calls (B = 1, 2-8 heads, N 1.5k-6k, head dims "
                          "64 and 128) where flash-attn 2's heuristic splits the keys, and one "
                          "where it does not; SDPA flash and cuDNN; frozen for a split "
                          "forward's causal tail factor taken for the split grid",
    "external-holdout48": "causal calls with more queries than keys (N_q / N_k 1.3-8, "
                          "head dims 64 and 128, GQA once, bf16), SDPA flash (lower-right "
                          "CausalBias) and FlexAttention, forward and backward; frozen for "
                          "the backward's causal tail from the key tiles' columns",
    "external-holdout49": "causal calls with more queries than keys (N_q / N_k 1.25-8, head "
                          "dims 64 and 128, GQA, fp16), SDPA flash, FlexAttention and "
                          "flash_attn.cute, forward and backward; measured in the same device "
                          "session as hold-out 48 and sealed (not read) until the model was "
                          "frozen for the forward's keyless query tiles",
    "external-holdout50": "new shapes for FlexAttention's backward grid (GQA 1-8, N 512-16k, "
                          "causal and not, N_q > N_k twice, head dims 64 and 128, fp16 once), "
                          "FlexAttention, SDPA flash and cuDNN, forward and backward; frozen "
                          "at f8cb2d3 for the grid's dK/dV and dQ programs (FA2.dq_programs) "
                          "and the causal kernel's spills at head dim 128",
    "external-holdout51": "head dims that are not a multiple of 8 (36, 60, 90, 100, 124) "
                          "beside the multiples next to them (64, 104): SDPA flash pads them "
                          "(three copies, the next multiple's kernel; its backward pads dO and "
                          "copies the gradients out; frozen for that mechanism, read from "
                          "PyTorch's attention.cpp, before measuring); FlexAttention at the "
                          "same head dims runs a masked power-of-two tile, which perfsim "
                          "refuses (the rows' narrower loads are unmeasured): its rows are "
                          "measured for that rule; and three causal calls whose lengths round "
                          "up by different amounts to the query and key tiles (N 700-3000, "
                          "N_q > N_k once), frozen for whole tiles on the mask's own diagonal "
                          "(Dims.mask_lengths)",
    "external-holdout52": "new shapes for xFormers' backward (head dims 32-256 across its three "
                          "kernels, N 128-12k, B·H 4-320: key splits per key block, one split "
                          "for a large grid of few keys, ⌊200 / (B·H)⌋ above head dim 128), "
                          "SDPA memory-efficient, flash and cuDNN, forward and backward; frozen "
                          "for the locked dQ accumulation (FA2.dq_lock_waits, measured by "
                          "probe_dq_lock.py), PyTorch's key splits and the gmem accumulators",
    "external-holdout53": "16 shapes drawn at random (validate/draw_holdout.py, seed 53) from the "
                          "range the accuracy issue names: head dims 64, 128 and 256, N 128-15k "
                          "stratified on a log scale, B·N 4k-32k tokens, 8-40 heads, GQA 1-8, "
                          "causal or not, bf16 or fp16; every implementation, forward and "
                          "backward; frozen at 3cf36b2 (the longest-CTA bound for LPT grids and "
                          "the varlen two-kind tail, never timed) as a general check of the "
                          "default path",
    "external-holdout54": "16 shapes drawn at random (validate/draw_holdout.py, seed 54) over "
                          "the same range as hold-out 53; frozen at 0ea6802 for the mask census "
                          "of flash-attn 2's causal forward (softmax_costs.MASK_CENSUS), the "
                          "causal shapes at head dims 64 and 128 its test, every other row a "
                          "general check of the default path",
    "external-holdout55": "FlexAttention's backward above head dim 128 (d 144-256, N 768-12k, "
                          "causal and not, GQA, fp16 twice), FlexAttention, SDPA flash and "
                          "cuDNN, forward and backward; frozen at 145ad59 for the causal "
                          "kernel's spill bytes (FLEX_BWD_MASKED_SPILL_BYTES), one figure for "
                          "head dims 129-255 without a mask (FLEX_BWD_SPILL_BYTES) and the "
                          "energy of a spilled byte (PowerSpec.spill_pj_per_byte)",
    "external-holdout56": "FlexAttention's forward at odd, even and multiple-of-16 lengths "
                          "off 128 over its profiled sm_90 tiles (head dims 64, 128, 176, 224, "
                          "256) and one unprofiled (96); drawn after the freeze for the "
                          "length classes (softmax_costs.FLEX_FWD_BOUND_CHECK_CLASSES); "
                          "measured on a lent H100 the next session",
    "external-holdout57": "cuDNN's forward where its K/V ring holds one stage (head dims "
                          "160-256, causal twice, N 1024-8192) and a two-stage control (96), "
                          "with SDPA flash for the ranking, forward and backward; "
                          "the shapes of the Nsight Compute hold-out of the single-stage ring "
                          "(KernelCost.ring_loads), frozen at e09525e",
    "external-holdout58": "16 shapes drawn at random (validate/draw_holdout.py, seed 58) over "
                          "the same range as hold-out 53; frozen at 8b16f0a (the tenth "
                          "session's end: flash-attn 2's varlen split rule and flash-attn 3's "
                          "paged path, which no fixed-length row reaches) as a general check "
                          "of the default path after hold-outs 54-57's changes",
    "external-holdout59": "15 shapes drawn at random (validate/draw_holdout.py, seed 59) over "
                          "the same range as hold-out 53; frozen at a1a314b (the eleventh "
                          "session's end: launch rules read from flash-attn 3's, "
                          "flash_attn.cute's and flash-attn 4's source) as a general check of "
                          "the default path; the draw's 16th (B 64, H 8, N 256, d 256 causal) "
                          "was a main-grid shape, measured and then taken out "
                          "(results-main-grid-shape.jsonl)",
    "external-holdout60": "12 shapes drawn at random (validate/draw_holdout.py, seed 60) at "
                          "head dims between flash-attn 2's compiled ones (40-248, multiples "
                          "of 8); frozen at 6346048 (its predicated path's shared-memory "
                          "wavefronts, the 256 backward's prefetch) as the check of that "
                          "change on shapes it was not read from",
    "external-holdout61": "10 shapes drawn at random (validate/draw_holdout.py, seed 61) at "
                          "head dims 160-256, where cuDNN's forward runs a single-stage K/V "
                          "ring; cuDNN and SDPA flash, forward and backward; drawn and "
                          "committed before the L2-hit step's fit was measured, timed in the "
                          "same device call as that probe and scored only after the fit was "
                          "written and committed",
    "external-holdout62": "16 shapes drawn at random (validate/draw_holdout.py, seed 62) over "
                          "the general range (head dims 64 / 128 / 256, N 128-16k, causal or "
                          "not, GQA, bf16 and fp16); drawn and committed at 9cab966 (the "
                          "sixteenth session's end) before any timing, as the seventeenth "
                          "session's general check of the default path on every "
                          "implementation",
    "external-holdout63": "16 shapes drawn at random (validate/draw_holdout.py, seed 63) over "
                          "the general range (head dims 64 / 128 / 256, N 128-16k, causal or "
                          "not, GQA, bf16 and fp16); drawn and committed at f5abcc0 (after "
                          "cuDNN's forward took its MMAs and exps in turn) before any timing, "
                          "the eighteenth session's check of that change and of the default "
                          "path on every implementation",
    "external-holdout64": "16 shapes drawn at random (validate/draw_holdout.py, seed 64) over "
                          "the general range (head dims 64 / 128 / 256, N 128-16k, causal or "
                          "not, GQA, bf16 and fp16); drawn and committed at e6dae5a before any "
                          "timing, the nineteenth session's check of the default path on every "
                          "implementation (the first H200-or-H100 grid timed after cuDNN's "
                          "forward took its MMAs and exps in turn, hold-out 63 aside)",
    "external-holdout65": "16 shapes drawn at random (validate/draw_holdout.py, seed 65) over "
                          "the general range (head dims 64 / 128 / 256, N 128-16k, causal or "
                          "not, GQA, bf16 and fp16); drawn and committed at 3538a8d before any "
                          "timing, the twentieth session's check of the default path on every "
                          "implementation",
    "external-holdout66": "16 shapes drawn at random (validate/draw_holdout.py, seed 66) over "
                          "the general range (head dims 64 / 128 / 256, N 128-16k, causal or "
                          "not, GQA, bf16 and fp16); drawn and committed at 31fe198 before any "
                          "timing, timed at the twentieth session's end on an H100 (its rows "
                          "score the same by 31fe198 and by that session's last model)",
    "external-holdout67": "16 shapes drawn at random (validate/draw_holdout.py, seed 67) over "
                          "the general range (head dims 64 / 128 / 256, N 128-16k, causal or "
                          "not, GQA, bf16 and fp16); drawn and committed at bb3b6ef's model "
                          "before any timing, the twenty-second session's check of the default "
                          "path on every implementation",
    "external-holdout68": "16 shapes drawn at random (validate/draw_holdout.py, seed 68) over "
                          "the general range (head dims 64 / 128 / 256, N 128-16k, causal or "
                          "not, GQA, bf16 and fp16); drawn and committed before any timing "
                          "(the model bb3b6ef's for the H100: the session's changes before it "
                          "touch no h100-sxm5 time), timed right after hold-out 67",
    "external-holdout69": "16 shapes drawn at random (validate/draw_holdout.py, seed 69) over "
                          "the general range (head dims 64 / 128 / 256, N 128-16k, causal or "
                          "not, GQA, bf16 and fp16); drawn and committed at 2407df5's model "
                          "before any timing, the twenty-third session's check of the default "
                          "path",
    "external-holdout70": "16 shapes drawn at random (validate/draw_holdout.py, seed 70) over "
                          "the general range, five of them short calls of many units (N "
                          "192-448, B 18-64); drawn and committed at b6f6367's model before "
                          "any timing, the twenty-fourth session's check of the default path",
}


def holdout_file(name: str) -> Path:
    """The JSON file of hold-out grid ``name`` (a key of :data:`HOLDOUTS`)."""
    return GRID_DIR / (name.replace("external-", "external_") + ".json")


def holdout(name: str) -> list[Shape]:
    """The shapes of hold-out grid ``name`` (:data:`HOLDOUTS`)."""
    return [Shape(**item) for item in json.loads(holdout_file(name).read_text())]


GRIDS = {"external": external_grid,
         **{name: (lambda name=name: holdout(name)) for name in HOLDOUTS}}


def grid(name: str) -> list[Shape]:
    """Shapes of ``external``, ``external-holdout`` or a JSON file of Shape fields."""
    if name in GRIDS:
        return GRIDS[name]()
    return [Shape(**item) for item in json.loads(Path(name).read_text())]


def row_key(shape: Shape, impl: str) -> str:
    """``<shape key incl. phase>|<impl>`` (the key format of runner.py)."""
    return f"{shape.key}|{impl}"


def plan(grid_name: str, impls=DEFAULT_IMPLS) -> list[tuple[Shape, str]]:
    """(shape with phase, impl) in measuring order: the main implementations shape by shape
    (fwd then bwd; the d = 128 shapes come first in the grid), then ``sdpa_math`` on every
    shape, then ``flex`` (on :data:`FLEX_SUBSET` for the main grid, every shape otherwise)."""
    shapes = grid(grid_name)
    impls = list(impls)
    unknown = [i for i in impls if i not in IMPLS]
    if unknown:
        raise ValueError(f"unknown implementation(s) {unknown}; known: {', '.join(IMPLS)}")
    rows = [(s.with_phase(p), i) for s in shapes for p in PHASES for i in MAIN_IMPLS
            if i in impls]
    if "sdpa_math" in impls:
        rows += [(s.with_phase(p), "sdpa_math") for s in shapes for p in PHASES]
    if "flex" in impls:
        flex_shapes = FLEX_SUBSET if grid_name == "external" else shapes
        rows += [(s.with_phase(p), "flex") for s in flex_shapes for p in PHASES]
    if "eager" in impls:
        rows += [(s.with_phase(p), "eager") for s in shapes for p in PHASES]
    return rows


def benchmark_flops(shape: Shape) -> float:
    """FlashAttention benchmark convention: forward 4·B·H·N_q·N_k·d (halved when causal with
    N_q = N_k), backward 2.5x the forward. A causal call with N_q != N_k counts the
    (query, key) pairs its bottom-right mask leaves (``perfsim.tiles.visible_pairs``)."""
    if shape.causal and shape.seqlen_q != shape.seqlen_k:
        from perfsim.tiles import visible_pairs

        pairs = float(visible_pairs(shape.seqlen_q, shape.seqlen_k, right=0))
    else:
        pairs = shape.seqlen_q * shape.seqlen_k * (0.5 if shape.causal else 1.0)
    fwd = 4.0 * shape.batch * shape.heads * pairs * shape.head_dim
    return fwd * (2.5 if shape.phase == "bwd" else 1.0)


# --------------------------------------------------------------------------------------------
# implementations (GPU side)


class Unsupported(Exception):
    """The implementation does not run this shape (recorded ``unsupported``)."""


class Built:
    """One implementation on fixed inputs: ``forward()`` returns O; ``backward_fn(do)``
    returns a no-argument function computing (dq, dk, dv) from one saved forward. ``to_bhnd``
    maps its tensors to (batch, heads, seqlen, head_dim); ``make_do`` lays out dO."""

    def __init__(self, forward, backward_fn, config, context=None, to_bhnd=None, make_do=None,
                 after_first=None):
        from contextlib import nullcontext

        self.forward = forward
        self.backward_fn = backward_fn
        self.config = config
        self.context = context or nullcontext
        self.to_bhnd = to_bhnd or (lambda t: t)
        self.make_do = make_do or (lambda do: do)
        self.after_first = after_first


def _external_backend(shape: Shape, impl: str, q, k, v) -> Built:
    from perfsim.validate import backends, measure
    from perfsim.validate.runner import Row

    try:
        got = backends.impl(Row(shape, impl, "external"), q, k, v)
    except measure.Unsupported as exc:
        raise Unsupported(str(exc)) from None

    @_contextmanager
    def context():
        try:
            with got.context():
                yield
        except measure.Unsupported as exc:
            raise Unsupported(str(exc)) from None

    return Built(got.forward, got.backward_fn, dict(got.launch_config), context=context)


def _eager(shape: Shape, q, k, v) -> Built:
    """Eager PyTorch attention: validate/kernels/standard.py (``repeat_interleave`` for GQA,
    ``torch.matmul``, ``* scale``, ``masked_fill``, ``torch.softmax``, ``torch.matmul``)."""
    from perfsim.validate.kernels import load
    from perfsim.validate.measure import autograd_backward

    std = load("standard")

    def f(a, b, c):
        return std.forward(a, b, c, causal=shape.causal)[0]

    cfg = {"backend": "eager torch ops (validate/kernels/standard.py)", "softmax": "fused",
           "mask": "masked_fill"}
    return Built(lambda: f(q, k, v), autograd_backward(f, q, k, v), cfg)


def _contextmanager(fn):
    from contextlib import contextmanager

    return contextmanager(fn)


def _cute(shape: Shape, q, k, v) -> Built:
    try:
        import flash_attn.cute as fa_cute
        from flash_attn.cute import flash_attn_func
        from flash_attn.cute import interface as fi
    except Exception as exc:  # noqa: BLE001 - not installed on this machine
        raise Unsupported(f"flash_attn.cute does not import: {type(exc).__name__}: "
                          f"{str(exc).strip()[:200]}") from None
    from dataclasses import asdict

    from perfsim.validate.measure import autograd_backward

    qc, kc, vc = (t.transpose(1, 2).contiguous() for t in (q, k, v))

    def f(a, b, c):
        r = flash_attn_func(a, b, c, causal=shape.causal)
        return r[0] if isinstance(r, (tuple, list)) else r

    d = shape.head_dim
    cfg = {"backend": "flash_attn.cute.flash_attn_func (flash-attn-4)", "layout": "bshd",
           "causal": shape.causal, "pack_gqa": shape.heads != shape.kv_heads}
    for name, mod in (("flash_attn", fa_cute),):
        cfg[f"{name}_version"] = getattr(mod, "__version__", None)
    try:
        from importlib.metadata import version

        cfg["flash_attn_4"] = version("flash-attn-4")
        cfg["nvidia_cutlass_dsl"] = version("nvidia-cutlass-dsl")
    except Exception:  # noqa: BLE001
        pass
    try:
        cfg["fwd_tile"] = asdict(fi._tile_size_fwd_sm90(d, d, shape.causal, False))
        cfg["bwd_tile"] = asdict(fi._tile_size_bwd_sm90(d, d, shape.causal, False))
        cfg["tile_source"] = "interface._tile_size_fwd_sm90 / _tile_size_bwd_sm90 (sm90 path)"
    except Exception as exc:  # noqa: BLE001
        cfg["tile_source"] = f"unreadable: {type(exc).__name__}: {exc}"[:200]
    return Built(lambda: f(qc, kc, vc), autograd_backward(f, qc, kc, vc), cfg,
                 to_bhnd=lambda t: t.transpose(1, 2),
                 make_do=lambda do: do.transpose(1, 2).contiguous())


#: Text patches applied to the tutorial before it is imported: (old, new, why). Each old text
#: must occur exactly once. For fp16 inputs the dtype patches change nothing.
TUTORIAL_PATCHES = (
    ("        p = p.to(dtype)\n        # note that this non transposed v",
     "        p = p.to(v.dtype)\n        # note that this non transposed v",
     "forward P cast to V's dtype instead of fp16 (bf16 inputs)"),
    ("    desc_o.store([qo_offset_y, 0], acc.to(dtype))",
     "    desc_o.store([qo_offset_y, 0], acc.to(q.dtype))",
     "forward O stored in Q's dtype instead of fp16 (bf16 inputs)"),
    ("    offset_y = off_z + off_h * N_CTX\n",
     "    offset_y = off_z * (N_CTX * H) + off_h * N_CTX\n",
     "TMA row offset of batch off_z (the stored version adds off_z, wrong for batch > 1; "
     "later tutorial versions use off_z * (N_CTX * H))"),
    ("        ppT = ppT.to(tl.float16)", "        ppT = ppT.to(Q.dtype.element_ty)",
     "backward P^T cast to the input dtype instead of fp16"),
    ("        dsT = dsT.to(tl.float16)", "        dsT = dsT.to(Q.dtype.element_ty)",
     "backward dS^T cast to the input dtype instead of fp16"),
    ("        ds = ds.to(tl.float16)", "        ds = ds.to(K.dtype.element_ty)",
     "backward dS cast to the input dtype instead of fp16"),
)
#: The forward autotuner is restricted to these (BLOCK_M, BLOCK_N, num_stages, num_warps)
#: of the tutorial's own TMA config space (its keep_tma filter applies too).
TUTORIAL_CONFIGS = ((128, 64, 3, 4), (128, 128, 3, 8), (64, 64, 3, 4), (64, 64, 2, 4))
_TUTORIAL = {}


def _tutorial_module():
    if "mod" in _TUTORIAL:
        return _TUTORIAL["mod"]
    import importlib.util
    import tempfile

    src_path = EXT_DIR / TUTORIAL_FILE
    if not src_path.is_file():
        raise Unsupported(f"{src_path} missing (carry .ext)")
    text = src_path.read_text()
    for old, new, why in TUTORIAL_PATCHES:
        if text.count(old) != 1:
            raise Unsupported(f"tutorial patch target not found exactly once ({why})")
        text = text.replace(old, new)
    # Triton's JIT reads kernel source from the file, so the patched text goes to a file.
    out = Path(tempfile.gettempdir()) / "perfsim_triton_tutorial_patched.py"
    out.write_text(text)
    spec = importlib.util.spec_from_file_location("perfsim_triton_tutorial_patched", out)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import triton

    keep = [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_stages=s, num_warps=w,
                          pre_hook=mod._tma_pre_hook)
            for bm, bn, s, w in TUTORIAL_CONFIGS]
    keep = [c for c in keep if mod.keep_tma(c)]
    mod._attn_fwd_tma.configs = keep
    _TUTORIAL["mod"] = mod
    _TUTORIAL["sha"] = format(zlib.crc32(src_path.read_bytes()), "08x")
    return mod


def _config_text(cfg) -> dict | str | None:
    if cfg is None:
        return None
    try:
        return {**dict(cfg.kwargs), "num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
    except Exception:  # noqa: BLE001
        return str(cfg)


def _tutorial(shape: Shape, q, k, v) -> Built:
    if shape.heads != shape.kv_heads:
        raise Unsupported("triton tutorial: no GQA (K/V must have the query's heads)")
    if shape.head_dim not in (16, 32, 64, 128, 256):
        raise Unsupported(f"triton tutorial: head_dim {shape.head_dim} not in 16..256 powers of 2")
    if shape.head_dim < min(c[1] for c in TUTORIAL_CONFIGS):
        # the forward's tl.static_assert(BLOCK_N <= HEAD_DIM) fails for every config here
        raise Unsupported(f"triton tutorial: head_dim {shape.head_dim} is below the key tile "
                          "of every configuration timed here (BLOCK_N 64 or 128; its forward "
                          "asserts BLOCK_N <= HEAD_DIM)")
    if shape.phase == "bwd" and not shape.causal:
        raise Unsupported("triton tutorial: its backward computes causal attention only "
                          "(_attn_bwd always masks the diagonal block and skips the blocks "
                          "above it)")
    if shape.phase == "bwd" and shape.seqlen_q % 128:
        raise Unsupported("triton tutorial: backward needs N a multiple of 128 "
                          "(PRE_BLOCK, BLOCK_N1)")
    mod = _tutorial_module()
    import triton

    from perfsim.validate.measure import autograd_backward

    scale = 1.0 / math.sqrt(shape.head_dim)

    def f(a, b, c):
        return mod.attention(a, b, c, shape.causal, scale)

    cfg = {"backend": "triton tutorial 06-fused-attention (TMA path on sm90)",
           "triton": triton.__version__, "source_crc32": _TUTORIAL["sha"],
           "patches": [why for _, _, why in TUTORIAL_PATCHES],
           "autotune_configs": [list(c) for c in TUTORIAL_CONFIGS],
           "bwd_fixed": {"BLOCK_M1": 32, "BLOCK_N1": 128, "BLOCK_M2": 128, "BLOCK_N2": 32,
                         "BLK_SLICE_FACTOR": 2, "num_warps": 4, "num_stages": 5},
           "causal": shape.causal}

    def after_first(c=cfg):
        c["fwd_config"] = _config_text(getattr(mod._attn_fwd_tma, "best_config", None))

    return Built(lambda: f(q, k, v), autograd_backward(f, q, k, v), cfg,
                 after_first=after_first)


def build(shape: Shape, impl: str, q, k, v) -> Built:
    if shape.dropout_p and impl in ("cute", "triton_tutorial", "eager"):
        raise Unsupported(f"{impl} has no dropout")
    if impl in ("sdpa_flash", "sdpa_cudnn", "sdpa_efficient", "sdpa_math", "flex"):
        return _external_backend(shape, impl, q, k, v)
    if impl == "cute":
        return _cute(shape, q, k, v)
    if impl == "triton_tutorial":
        return _tutorial(shape, q, k, v)
    if impl == "eager":
        return _eager(shape, q, k, v)
    raise Unsupported(f"unknown implementation {impl!r}")


def available(impl: str) -> str | None:
    """Why ``impl`` cannot run on this machine at all (None if it can)."""
    if impl == "cute":
        try:
            import flash_attn.cute  # noqa: F401
        except Exception as exc:  # noqa: BLE001
            return f"flash_attn.cute does not import: {type(exc).__name__}: {exc}"[:300]
    if impl == "triton_tutorial" and not (EXT_DIR / TUTORIAL_FILE).is_file():
        return f"{EXT_DIR / TUTORIAL_FILE} missing"
    return None


# --------------------------------------------------------------------------------------------
# one row


def make_inputs(shape: Shape, key: str):
    import torch

    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(key.encode()))
    dt = torch.bfloat16 if shape.dtype == "bf16" else torch.float16

    def randn(*dims):
        return torch.randn(*dims, generator=gen, device="cuda", dtype=dt)

    q = randn(shape.batch, shape.heads, shape.seqlen_q, shape.head_dim)
    k = randn(shape.batch, shape.kv_heads, shape.seqlen_k, shape.head_dim)
    v = randn(shape.batch, shape.kv_heads, shape.seqlen_k, shape.head_dim)
    do = randn(shape.batch, shape.heads, shape.seqlen_q, shape.head_dim)
    return q, k, v, do


def check(shape: Shape, built: Built, q, k, v, do) -> dict:
    """Run once; all outputs finite; relative error vs float64 on the first and last slice."""
    import torch

    from perfsim.validate.kernels.reference import reference_attention, relative_error

    if shape.phase == "bwd":
        outs = built.backward_fn(built.make_do(do))()
        names = ("dq", "dk", "dv")
    else:
        outs = (built.forward(),)
        names = ("o",)
    torch.cuda.synchronize()
    outs = [built.to_bhnd(o) for o in outs]
    for name, out in zip(names, outs, strict=True):
        if not bool(torch.isfinite(out).all()):
            return {"status": "incorrect", "reason": f"{name} has NaN/inf elements",
                    "correctness_rel_error": None, "outputs_finite": False}
    group = shape.heads // shape.kv_heads
    errors = {}
    picks = list(dict.fromkeys([(0, 0), (shape.batch - 1, shape.kv_heads - 1)]))
    for b, g in picks:
        hs = slice(g * group, (g + 1) * group)
        qs, ks, vs = (t[b:b + 1].double() for t in (q[:, hs], k[:, g:g + 1], v[:, g:g + 1]))
        if shape.phase == "bwd":
            qs, ks, vs = (t.requires_grad_() for t in (qs, ks, vs))
            ref, _ = reference_attention(qs, ks, vs, causal=shape.causal)
            ref.backward(do[b:b + 1, hs].double())
            pairs = {"dq": (outs[0][b:b + 1, hs], qs.grad), "dk": (outs[1][b:b + 1, g:g + 1],
                                                                  ks.grad),
                     "dv": (outs[2][b:b + 1, g:g + 1], vs.grad)}
        else:
            ref, _ = reference_attention(qs, ks, vs, causal=shape.causal)
            pairs = {"o": (outs[0][b:b + 1, hs], ref)}
        for name, (out, r) in pairs.items():
            errors[name] = max(errors.get(name, 0.0), relative_error(out, r))
        del qs, ks, vs, ref, pairs
    worst, tol = max(errors.values()), TOLERANCE[shape.dtype]
    rec = {"correctness_rel_error": worst, "correctness_rel_errors": errors,
           "correctness_tolerance": tol, "outputs_finite": True,
           "correctness_checked": f"{len(picks)} (batch, kv-head group) slices (first, last) vs "
                                  f"float64, all rows; every element of {'/'.join(names)} "
                                  "finite"}
    if shape.dropout_p:
        return _check_dropout(shape, rec, errors, tol)
    if not worst <= tol:
        rec.update(status="incorrect", reason=f"relative error {worst:.3g} > {tol:g}")
    return rec


def _check_dropout(shape: Shape, rec: dict, errors: dict, tol: float) -> dict:
    """A dropout row's check. The kernel draws its mask inside (Philox), so the outputs cannot
    be compared with a reference element by element: each must differ from the no-dropout
    float64 reference by more than the dtype's tolerance (dropout was applied) and by less
    than ``max(1, 4 sqrt(p / (1 - p)))`` (the relative spread of an inverted-dropout average,
    with room; a broken kernel lands far outside)."""
    p = shape.dropout_p
    high = max(1.0, 4 * math.sqrt(p / (1 - p)))
    rec["correctness_tolerance"] = [tol, high]
    rec["correctness_checked"] = (f"dropout {p:g}: every element finite; each of "
                                  f"{'/'.join(errors)} differs from the no-dropout float64 "
                                  f"reference by a relative {tol:g} to {high:.3g}")
    bad = {n: e for n, e in errors.items() if not tol < e < high}
    if bad:
        rec.update(status="incorrect", reason="dropout: relative difference from the "
                   f"no-dropout reference outside ({tol:g}, {high:.3g}): " +
                   ", ".join(f"{n} {e:.3g}" for n, e in bad.items()))
    return rec


def time_op(fn, sampler) -> dict:
    """Settle, then time calls back to back with CUDA events around each, sampling NVML."""
    import torch

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    est = max(time.perf_counter() - t0, 1e-6)
    # warm-up: back to back for WARM_S (and >= 20 calls for slow calls), capped
    warm_target = WARM_S
    if est > SLOW_CALL_S:
        warm_target = max(WARM_S, min(SLOW_WARM_CALLS * est, MAX_WARM_S))
    chunk = max(1, int(0.05 / est))
    warm_calls, w0 = 0, time.perf_counter()
    while True:
        for _ in range(chunk):
            fn()
        torch.cuda.synchronize()
        warm_calls += chunk
        el = time.perf_counter() - w0
        if el >= warm_target:
            break
    est = max(el / warm_calls, 1e-7)
    n = max(MIN_CALLS, math.ceil(MIN_TIMED_S / est))
    n = min(n, MAX_CALLS, max(MIN_CALLS_SLOW, math.ceil(MAX_TIMED_S / est)))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    if sampler is not None:
        sampler.start()
    w1 = time.perf_counter()
    for i in range(n):
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    wall = time.perf_counter() - w1
    samples = sampler.stop() if sampler is not None else []
    times = sorted(s.elapsed_time(e) * 1e-3 for s, e in zip(starts, ends))
    region = starts[0].elapsed_time(ends[-1]) * 1e-3

    def q(p):
        return times[min(len(times) - 1, int(round(p * (len(times) - 1))))]

    from perfsim.validate.nvml_sampler import summarize

    rec = {"measured_s": q(0.5), "measured_p20_s": q(0.2), "measured_p80_s": q(0.8),
           "measured_mean_s": sum(times) / len(times), "n_calls": n,
           "warmup_calls": warm_calls, "warmup_s": el, "timed_region_s": region,
           "timed_wall_s": wall, "l2_flushed": False,
           "timing_method": "CUDA events around each call, back to back, no L2 flush; "
                            f"warm-up >= {WARM_S} s back to back first"}
    rec.update(summarize(samples))
    return rec


def measure_row(shape: Shape, impl: str, sampler, versions: dict) -> dict:
    """One row, never raising (except on a fatal CUDA error, re-raised after recording)."""
    import torch

    key = row_key(shape, impl)
    rec = {"key": key, **shape.fields(), "impl": impl, "algorithm": impl, "kind": "external",
           "grid_flops": benchmark_flops(shape)}
    t0 = time.perf_counter()
    built = None
    try:
        q, k, v, do = make_inputs(shape, key)
        built = build(shape, impl, q, k, v)
        with built.context():
            rec.update(check(shape, built, q, k, v, do))
            if built.after_first:
                built.after_first()
            if rec.get("status") != "incorrect":
                if shape.phase == "bwd":
                    fn = built.backward_fn(built.make_do(do))
                else:
                    fn = built.forward
                rec.update(time_op(fn, sampler))
                rec["status"], rec["reason"] = "ok", ""
                rec["achieved_tflops"] = rec["grid_flops"] / rec["measured_s"] / 1e12
                if impl == "flex" and shape.seqlen_q >= 1024 and rec["achieved_tflops"] < 30:
                    rec["reason"] = ("suspect: achieved TFLOP/s below 30 at N >= 1024 "
                                     "(a silent fallback to unfused flex_attention?)")
    except Unsupported as exc:
        rec.update(status="unsupported", reason=str(exc)[:500])
    except torch.cuda.OutOfMemoryError as exc:
        rec.update(status="oom", reason=str(exc).splitlines()[0][:300])
    except Exception as exc:  # noqa: BLE001 - recorded
        text = str(exc).strip()
        first = text.splitlines()[0][:400] if text else ""
        low = text.lower()
        if type(exc).__name__ == "OutOfResources":  # Triton refuses the (fixed) config
            rec.update(status="unsupported", reason=f"OutOfResources: {first}")
        elif "out of memory" in low:
            rec.update(status="oom", reason=f"{type(exc).__name__}: {first}")
        else:
            rec.update(status="error", reason=f"{type(exc).__name__}: {first}")
        from perfsim.validate.measure import FATAL_CUDA

        if any(m in low for m in FATAL_CUDA):
            rec["fatal"] = True
    finally:
        if built is not None:
            rec["launch_config"] = {**built.config, **versions}
        else:
            rec["launch_config"] = dict(versions)
        rec["wall_s"] = time.perf_counter() - t0
        rec["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        built = q = k = v = do = None  # noqa: F841
        if rec.get("status") == "oom":
            torch.cuda.empty_cache()
    return rec
