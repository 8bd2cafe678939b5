"""Non-matmul work of the softmax family, per score element or per row, by pipe.

Two pipes of the CUDA cores carry it (``perfsim.timing.cuda_core_seconds``):

* the **FMA pipe**, counted in FLOP slots (``KernelCost.fp32_flops``): 2 per lane
  instruction, whether it is an FMA or a lone add or multiply — each occupies a lane for one
  clock (``FMA_SLOTS``);
* the **ALU pipe**, counted in lane instructions (``KernelCost.alu_ops``): max/min,
  compare, select and the conversion of P to 16 bits (one F2FP packs two elements).

The per-element counts are the online-softmax steps of the papers' pseudo-code (FA1
Algorithm 1, FA2 Algorithms 1/2, FA4 §3.1) as the compiled kernels issue them, checked
against the executed-instruction census of Nsight Compute on the project's H200
(``sass__inst_executed_per_opcode``; ``validate/reports/h200/probes/ncu/summary.json``), per
score element, B·H·N² = 537M (d = 128):

=====================  =====  =====  ======  ======  =====  =====  ===========================
kernel                 FMUL   FADD   FMNMX   FSETP   F2FP   MUFU   counted here (FMA + ALU)
=====================  =====  =====  ======  ======  =====  =====  ===========================
SDPA flash fwd d=64    3.62   2.00   1.06    1.06    0.51   1.03   2+1 + 64/128 + 2 · 1.5 + 1
SDPA flash fwd d=128   5.25   2.00   1.12    1.13    0.52   1.06   2+1 + 128/64 + 2 · 1.5 + 1
SDPA flash fwd d=256   7.25   2.00   1.12    1.13    0.53   1.06   2+1 + 256/64 + 2 · 1.5 + 1
cuDNN fwd d=128        2.06   2.03   1.06    0.03    0.52   1.03   2+1 + 128/128 · 1.5
flash_attn.cute fwd    1.06   1.00   1.06    —       0.52   1.03   2 + 128/128 · 1.5
  (and 1.03 FFMA)
Triton tutorial fwd    1.13   1.07   1.06    —       0.52   1.03   2 + 128/128 · 1.5
  (and 1.04 FFMA)
SDPA flash bwd d=128   4.16   2.00   —       1.12    1.03   1.00   4 + 2 · 1 + 1
=====================  =====  =====  ======  ======  =====  =====  ===========================

The "+ 2" and "+ 1" are the exp of a build without fast math (``EXP_FIXUP_*``): PyTorch
compiles its copy of flash-attn 2 without ``--use_fast_math``, so each ``exp2f`` becomes
``ex2.approx.f32`` and the compiler guards its range with an FSETP and two predicated FMULs
around the MUFU.EX2 (one FSETP per MUFU in the census). flash-attn's own ``setup.py`` and
cuDNN (no FSETP in its census) use the fast path. Register moves (MOV: 0.07-1.08 per score,
from register pressure at 255 registers) and integer address arithmetic are not counted.

Length: a table of measured figures — per score element by kernel, mask, bound check and
dropout — each beside the census it comes from; split up, a figure would leave its source.
"""

#: FLOP slots per FMA-pipe lane instruction.
FMA_SLOTS = 2

#: Online softmax forward, per score element, FMA pipe: scale and subtract the row max in one
#: FFMA (``s·scale·log2e − m·scale·log2e``), row sum of P (FADD) — as flash_attn.cute's sm90
#: forward and Triton's tutorial issue them (census: FFMA 1.03-1.04, FADD 1.00-1.07).
FWD_FMA_OPS_PER_SCORE = 2
#: ... one more where the scale and the subtraction stay apart (FMUL then FADD: SDPA flash's
#: and cuDNN's census, FADD 2.00-2.03 and no FFMA; ``FA2(fused_scale=False)``).
SPLIT_SCALE_FMA_OPS = 1
#: ... ALU pipe: the running row max (FMNMX) and half an F2FP (P to 16 bits, two per op).
FWD_ALU_OPS_PER_SCORE = 1.5
#: ... of which the row max (one FMNMX per score element): the exps of a row need it, so a
#: thread finishes it before its first exp (``KernelCost.exp_after``).
ROW_MAX_ALU_OPS_PER_SCORE = 1
#: ... and the conversion of P to 16 bits (half an F2FP), after the exps.
P_CONVERT_ALU_OPS_PER_SCORE = FWD_ALU_OPS_PER_SCORE - ROW_MAX_ALU_OPS_PER_SCORE
#: FMA-pipe FLOP slots per score element (forward).
ONLINE_SOFTMAX_FLOPS_PER_SCORE = FMA_SLOTS * FWD_FMA_OPS_PER_SCORE

#: Per row and visited key tile, deferred normalisation (FA2): rescale the O row by
#: ``exp(m_old − m_new)`` (``d_v`` FMULs) and update ℓ (one FMA); in FLOP slots, per
#: ``d_v`` element and per row.
RESCALE_FLOPS_PER_ROW_ELEMENT = FMA_SLOTS
RESCALE_FLOPS_PER_ROW_EXTRA = FMA_SLOTS

#: FA1 Algorithm 1 lines 11–12, per row and inner step: the O row is re-normalised each
#: step, ``diag(ℓ_new)^-1 (diag(ℓ_i) e^{m_i−m_new} O_i + e^{m̃−m_new} P̃ V)``: two scalings,
#: one add and one multiply by ``1/ℓ_new`` per element (4 lane instructions = 8 slots), plus
#: ℓ_new (2 FMAs) and the reciprocal and max (2 more instructions): 4 slots + 2 slots.
FA1_UPDATE_FLOPS_PER_ROW_EXTRA = 3 * FMA_SLOTS
FA1_UPDATE_FLOPS_PER_ROW_ELEMENT = 4 * FMA_SLOTS

#: MUFU exps per row and inner step: FA1 needs ``e^{m_i−m_new}`` and ``e^{m̃−m_new}`` (2);
#: FA2 needs ``e^{m_old−m_new}`` (1).
FA1_EXPS_PER_ROW_STEP = 2
FA2_EXPS_PER_ROW_STEP = 1

#: Causal or window mask on a diagonal tile: one compare/select per score element (ALU;
#: ASSUMED where no census below names the kernel: never profiled).
MASK_ALU_OPS_PER_SCORE = 1
#: The causal mask as the kernels that run it execute it, by the code that runs them
#: (``FusedAttention.bound_checks``): ``{phase: ((compiled head dim up to which it holds,
#: (ALU-pipe, FMA-pipe lane instructions per masked score element)), ...)}``; head dims above
#: the last entry keep :data:`MASK_ALU_OPS_PER_SCORE`. Census of a causal forward against the
#: non-causal one of the
#: same shape, the masked tiles flash-attn 2's ``n_masking_steps`` (Nsight Compute on the
#: H200, ``validate/reports/h200/probes/ncu/summary-causal-mask*.json``, read by
#: ``validate/mask_census.py``; N a multiple of both tiles):
#:
#: - ``"flash-attn"``: flash-attn 2's forward (PyTorch's copy, bf16). Head dim 64 (128 x 128
#:   tiles, N = 512): ALU +2.49, FMA +0.63. Head dim 128 (128 x 64 tiles, N = 256): ALU
#:   +4.11 (MOV +1.60, ISETP +1.05, FSEL +1.03, VIADD +0.32, LOP3 +0.10), FMA +1.32 (IMAD
#:   +0.96). The compare and select per element are the source's (``mask.h``:
#:   ``col_idx >= col_idx_limit_right`` then ``-INFINITY``); the moves are the compiler's.
#:   Head dims above 128 and the backward keep :data:`MASK_ALU_OPS_PER_SCORE` (no census;
#:   ASSUMED). ASSUMED as well, each unprofiled: a compiled head dim below 64 takes the head
#:   dim 64 figures and one between 64 and 128 (96) the 128 ones; every GPU takes the sm90
#:   census (sm80, sm89 and sm100 compile the same source to other code, and the RTX cards
#:   launch other tiles); the split-KV and paged kernels (64 x 128 and 64 x 256 tiles) take
#:   it per masked element; a window mask costs what the causal one does (its
#:   ``apply_mask_local`` adds the left-side compare), and N off the tiles takes the census
#:   of N on them, on the geometric count of masked tiles, where flash-attn 2 masks one tile
#:   more per query tile (``n_masking_steps``; that pair's census, +2.86 / +5.64 ALU at
#:   d 64 / 128, also holds the non-causal kernel's bound checks).
MASK_CENSUS = {
    "flash-attn": {"fwd": ((64, (2.49, 0.63)), (128, (4.11, 1.32)))},
}

#: FlexAttention's forward scales the scores twice before the exp (``PRESCALE_QK = False`` by
#: default: ``qk *= SM_SCALE``, then ``post_mod_scores *= RCP_LN2``, two IEEE multiplies the
#: compiler may not fold, in its template ``forward_block_mn``), where a fused kernel folds the
#: scale into the exp argument's FFMA. Census (Nsight Compute on the H200, torch 2.11,
#: ``validate/reports/h200/probes/ncu/summary.json`` and ``summary-flexdiv.json``, flex-fwd
#: d 96 and 128): FMUL 4.10 per score element where the rescale of O accounts for
#: ``d_v / B_c`` = 2, so 2 more; FMUL + FFMA + FADD 6.30 against the 4.05 the fused count
#: gives.
FLEX_SCALE_FMULS = 2
#: FlexAttention's forward with ``IS_DIVISIBLE`` false (N_q or N_k not a multiple of 128:
#: ``torch/_inductor/kernel/flex``) runs every K/V tile with ``CHECK_BLOCK_BOUNDARY``: a
#: select of −inf for the keys past ``N_k`` on every score element (its source comments that
#: applying it to each block was on par with the last block only). Census against the same
#: kernel at N = 4096 (summary-flexdiv.json, flex-fwd-d128-n4000): per score element FSEL
#: +1.04, ISETP +0.27, SEL +0.13 (ALU pipe), FFMA → FADD (no change in count): 1.44.
BOUND_CHECK_ALU_OPS_PER_SCORE = 1.44
#: ... and its backward (both the dK/dV and the dQ programs; the source says the mask goes on
#: the last block only, the compiled kernel checks every tile). Census against the same kernel
#: at N = 4096 (``summary-flexbwddiv.json``, flex-bwd d 96 and 128 at N = 4000; per score
#: element of the call, both passes): ALU pipe PRMT +2.48, SEL +2.46, FSEL +2.08, ISETP +1.07,
#: PLOP3 −0.62 = 7.47 (7.6 at d 96); FMA pipe FMUL + FADD + FFMA 8.06 → 10.39 (the two FFMAs
#: per score split into FMUL and FADD), +2.33 at both head dims. Cycles per score +22 %.
BWD_BOUND_CHECK_ALU_OPS_PER_SCORE = 7.47
BWD_BOUND_CHECK_FMA_OPS_PER_SCORE = 2.33
#: Per-tile bound checks by the code that runs them (``FusedAttention.bound_checks``):
#: ``{phase: (ALU-pipe, FMA-pipe lane instructions per score element)}``, each the census of a
#: length that is not a multiple of the kernel's tile less the census at N = 4096, same
#: kernel, same head dim, the padded tile's own work (MMAs, exps) left out (Nsight Compute on
#: the H200, ``validate/reports/h200/probes/ncu/summary-uneven.json`` against ``summary.json``):
#:
#: - ``"flex"``: FlexAttention, above.
#: - ``"flash-attn"``: flash-attn 2's kernels (PyTorch's copy, d 64, N = 4000): the forward
#:   masks the last K/V block only (its ``n_masking_steps``), FSEL +0.04; the backward
#:   (``Is_even_MN`` false) every tile: PLOP3 +1.58, FSEL +1.05, ISETP +0.27, IADD3 +0.16,
#:   VIADD +0.12 (ALU, 3.18) and IMAD +0.16 (FMA pipe).
#: - ``"cudnn"``: cuDNN's sm90 kernels (d 128, N = 4000; closed source, read from the counts
#:   only): forward SEL +1.05, ISETP +0.53, VIADD +0.42 (2.00) and IMAD +0.11; backward ISETP
#:   +1.11, FSEL +1.06, VIADD +0.56 (2.73) and IMAD +0.38.
#:
#: Each figure is one head dim's; other head dims and GPUs take it as measured (ASSUMED).
#: FlexAttention's forward bound checks on sm_90 by compiled tile and by the class of the
#: sequence lengths (``torch.compile(flex_attention, dynamic=False)`` bakes the lengths into
#: the kernel; Triton compiles the check from what it can prove about the constant): rows
#: ``(class, ALU, FMA, spill)`` — lengths whose largest power-of-two divisor is at least
#: ``class`` (16: multiples of 16; 2: even; 1: odd; the first row that holds), ALU- and
#: FMA-pipe lane instructions per score element of the padded tiles beyond the same kernel at a
#: multiple of 128, and the local-memory bytes a thread reloads per K/V step where the check
#: pushes the kernel past 255 registers. Keyed by ``(BLOCK_M, BLOCK_N, num_warps, the dots'
#: head dim)`` (``implementations.FLEX_FWD_CONFIGS["sm90"]``). Nsight Compute on a lent H100
#: (B = 3, H = 8, N = 2688 against 2689-2720; ``validate/reports/h100/probes/ncu/
#: summary-flex-lengths.json``, derived by ``python -m perfsim.validate.flex_length_census``):
#: the three classes each compile one code (2690, 2696 and 2700 identical; 2704 and 2720 within
#: 0.02), and the class of 16 reads the N = 4000 figure above (1.44-1.49 ALU per score) but at
#: the 64 x 64 tile whose dots run 256 wide (2.10). A class a tile was not profiled at takes
#: the next larger class's row, and a missing class 16 takes :data:`BOUND_CHECKS` (ASSUMED:
#: odd lengths cost 0.4-0.5 ALU per score more than even ones where both were profiled).
#: Tiles not listed (the default tile at dots of 16-128, other architectures) take
#: :data:`BOUND_CHECKS` for every class (not profiled). The 64 x 64 tile at dots 256 runs every
#: head dim from 129 to 255: its rows were profiled at 160 (ASSUMED for the others). The same
#: lengths' times (``reports/h100/probes/flex_lengths/probe_flex_lengths.json``) follow the
#: classes: at head dim 64, 121 µs at 2688, 137-143 at multiples of 16, 158 at even lengths,
#: 178 at 2689.
FLEX_FWD_BOUND_CHECK_CLASSES = {
    (128, 128, 4, 64): ((16, 1.48, 0.13, 0.0), (2, 2.16, 0.71, 24.7), (1, 2.55, 0.64, 80.7)),
    (128, 64, 8, 128): ((2, 1.87, 0.40, 0.0),),
    (64, 64, 4, 256): ((16, 2.10, 0.0, 0.0), (2, 7.36, 0.70, 16.1), (1, 7.87, 0.70, 20.2)),
    (64, 32, 4, 256): ((2, 4.04, 1.50, 0.0),),
}


def length_class(n: int) -> int:
    """The class of a sequence length in :data:`FLEX_FWD_BOUND_CHECK_CLASSES`: 16 for a
    multiple of 16, 2 for another even length, 1 for an odd one."""
    return 16 if n % 16 == 0 else 2 if n % 2 == 0 else 1


def flex_fwd_bound_check_classes(tile) -> tuple | None:
    """The three rows ``((16, …), (2, …), (1, …))`` of :data:`FLEX_FWD_BOUND_CHECK_CLASSES`
    for ``tile``, the missing ones filled as that table says, or ``None`` where the tile was
    not profiled."""
    rows = dict((row[0], row[1:]) for row in FLEX_FWD_BOUND_CHECK_CLASSES.get(tile, ()))
    if not rows:
        return None
    filled = {16: rows.get(16, (BOUND_CHECK_ALU_OPS_PER_SCORE, 0.0, 0.0))}
    filled[2] = rows.get(2, filled[16])
    filled[1] = rows.get(1, filled[2])
    return tuple((cls, *filled[cls]) for cls in (16, 2, 1))


BOUND_CHECKS = {
    "flex": {"fwd": (BOUND_CHECK_ALU_OPS_PER_SCORE, 0.0),
             "bwd": (BWD_BOUND_CHECK_ALU_OPS_PER_SCORE, BWD_BOUND_CHECK_FMA_OPS_PER_SCORE)},
    "flash-attn": {"fwd": (0.0, 0.0), "bwd": (3.18, 0.16)},
    "cudnn": {"fwd": (2.00, 0.11), "bwd": (2.73, 0.38)},
}

#: Backward, per score element (FA2 Algorithm 2), FMA pipe: scale S (FMUL), subtract the
#: logsumexp (FADD), ``dP − D`` (FADD) and ``P ∘ (…)`` (FMUL).
BWD_FMA_OPS_PER_SCORE = 4
#: ... ALU pipe: P and dS to 16 bits for their GEMMs (half an F2FP each).
BWD_ALU_OPS_PER_SCORE = 1
#: FMA-pipe FLOP slots per score element (backward).
BWD_FLOPS_PER_SCORE = FMA_SLOTS * BWD_FMA_OPS_PER_SCORE

#: Per exp of a build without fast math: two predicated FMULs (FMA pipe) and an FSETP (ALU)
#: that keep ``ex2.approx.f32`` out of the denormal range.
EXP_FIXUP_FMA_OPS = 2
EXP_FIXUP_ALU_OPS = 1

#: Fused softmax kernel (eager ``torch.softmax``), per element: subtract, sum, scale by
#: ``1/sum`` (3 FMA-pipe instructions); the max is an ALU op, the exp a MUFU op.
FUSED_SOFTMAX_FMA_OPS = 3
FUSED_SOFTMAX_ALU_OPS = 1

#: Softmax backward ``dS = P ∘ (dP − rowsum(dP ∘ P))``: multiply, sum, subtract, multiply
#: (FMA-pipe instructions).
SOFTMAX_BWD_FMA_OPS = 4

#: Integer and predicate arithmetic a kernel issues per score element (address computation,
#: loop and bound predicates, register moves) beyond the softmax counted above, by the code
#: that runs it (``FusedAttention.address_arithmetic``): ``{phase: {largest head dim of the
#: kernel: (ALU-pipe, FMA-pipe lane instructions per score element)}}``; a call takes the
#: kernel for ``max(d, d_v)``. Kernels without a census leave it uncounted (flash-attn 2's own
#: build, FlexAttention, the tutorial); PyTorch's build of flash-attn 2 issues 0.4-1.8 ALU and
#: 0.2-0.7 FMA-pipe instructions per score forward (``"pytorch-flash"``, below).
#: xFormers' CUTLASS kernels (SDPA's memory-efficient backend) issue ten to ninety times that.
#: Census: Nsight Compute on the H200, torch 2.11, B = 1, H = 4096 / d, N = 4096, per score
#: element of the call; ALU pipe = LOP3, ISETP, PLOP3, MOV, CS2R, LEA, P2R, VIADD, SEL, IADD3,
#: SHF, PRMT; FMA pipe = IMAD (``validate/reports/h200/probes/ncu/summary.json``,
#: ``efficient-fwd-d128`` / ``efficient-bwd-d128``; ``summary-efficient.json``, profiled after
#: hold-out 19 was measured, for the other kernels):
#:
#: - forward ``64x64_rf`` (head dims ≤ 64, profiled at 64): 12.17 and 3.80; ``64x128_rf``
#:   (≤ 128, at 128): LOP3 2.98, ISETP 2.81, PLOP3 2.16, MOV 1.16, CS2R 0.80, LEA 0.76, P2R
#:   0.66, VIADD 0.64, SEL 0.56, IADD3 0.54, SHF 0.44, PRMT 0.26 = 13.75, and IMAD 4.62;
#:   ``32x128_gmem`` (above 128, at 192): 25.58 and 8.94 (at 256: 27.08 and 9.37);
#: - backward ``64x64_k64`` (≤ 64, at 64): 20.84 and 5.80; ``128x128_k128`` (≤ 128, at 128):
#:   30.07 and 11.19; ``128x64_k65536`` (above 128, at 256): 94.39 and 41.26.
#:
#: The profile's pipe loads agree: at head dim 128 the forward's FMA pipe is 14.9 % and its
#: ALU pipe 36.3 % busy over 2.87 M cycles, against 13 % and 33 % from these counts and the
#: softmax's. Head dims between the profiled ones take their kernel's figure (ASSUMED), as do
#: the 64 x 64 backward kernels PyTorch picks where the 128 x 128 one does not fit; used on
#: every GPU (the same sm80 code).
#:
#: cuDNN's sm90 kernels (``"cudnn"``, keyed by the compiled head dim, the call's rounded up
#: to a multiple of 64): the same ALU list plus FSETP and FSEL (compares and selects beside the
#: softmax: 2 per score element in the backward), and on the FMA pipe IMAD plus the FP32
#: instructions beyond the backward softmax counted here (FMUL 3 + FADD 1 + FFMA 1 per score
#: against 4; 6 + 2 + 2 against 8 where both warpgroups recompute it, head dims above 128).
#: Census at B = 1, H = 4096 / d, N = 4096, non-causal (``summary.json`` cudnn-bwd-d64/128/256,
#: ``summary-cudnn-shapes.json`` cudnn-bwd-d96 and -d160, which run the 128 and 192 kernels):
#:
#: - forward: 0.46 + 0.11 (64), 0.52 + 0.16 (128; the d = 96 call the same), 0.62 + 0.09
#:   (192), 0.78 + 0.04 (256) — the forward's own FMUL/FADD/FMNMX are the softmax counts;
#: - backward: ALU 1.79 + 2.00 and IMAD 2.48 (+ 1) at 64; 2.79 + 2.00 and 3.76 (+ 1) at 128
#:   (identical for the d = 96 call); 7.01 + 4.00 and 10.72 (+ 2) at 192; 7.70 + 4.00 and
#:   12.00 (+ 2) at 256.
#:
#: The causal and N = 1024 profiles issue 5-40 % more per score (masking, edges): not
#: counted. Used wherever the preset runs cuDNN's sm90 kernels.
#: Dropout's instructions per score element, by the reference kernel family: ALU-pipe and
#: FMA-pipe lane instructions (the Philox draws, the keep test and the 1/(1-p) scale), forward
#: and backward (the backward draws the mask again). From Nsight Compute's per-pipe executed
#: instructions on the H200 (``sm__inst_executed_pipe_alu/fma``), the dropout call minus the
#: same call without, per score element, d = 128 (and 64 forward), B = 1, H = 4096 / d,
#: N = 4096, non-causal, dropout 0.1 (``validate/reports/h200/probes/ncu/summary-dropout.json``):
#:
#: - ``"none"`` (flash-attn 2, SDPA flash): forward ALU +3.40 and FMA +3.11 at d = 128, +3.86
#:   and +1.34 at d = 64; its dropout launch has half the key-tile width (``fwd_launch``),
#:   whose extra FMULs rescaling O (d_v / B_c per score: +2 at 128, +0.5 at 64) are counted
#:   already, leaving FMA +1.11 and +0.84: taken as ALU 3.6, FMA 1.0. flash-attn keeps 8 random
#:   bits per element (``p_dropout_in_uint8_t``): one Philox4x32-10 call (20 IMADs,
#:   ``PHILOX_OPS_PER_CALL``) per 16 elements. Backward: ALU +6.37, FMA +1.43.
#: - ``"cudnn"`` (cuDNN's sm90 kernels): forward ALU +5.56, FMA +5.17 (d = 64: +5.47, +5.11);
#:   backward ALU +5.07, FMA +5.24.
#: - ``"xformers"`` (SDPA's memory-efficient kernels): forward ALU +15.48, FMA +15.13 — one
#:   ``curand_uniform4`` (a Philox call and four int-to-float conversions) per 4 elements in
#:   PyTorch's ``mem_eff_attention`` kernels; backward ALU +29.20, FMA +17.77 (its dropout
#:   kernel, ``..._dropout_sm80``, also spills: +6.65 local loads and stores per score, not
#:   counted).
#:
#: Load/store and uniform-datapath instructions (+0.6-2.0 forward) are not counted. FA4 (no
#: sm100 census) is ASSUMED to draw as flash-attn 2 does; FA1 keeps its source count
#: (``base.FUSED_DROPOUT_OPS_PER_ELEMENT``).
DROPOUT_INSTRUCTIONS = {
    "none": {"fwd": (3.6, 1.0), "bwd": (6.37, 1.43)},
    "cudnn": {"fwd": (5.5, 5.15), "bwd": (5.07, 5.24)},
    "xformers": {"fwd": (15.48, 15.13), "bwd": (29.20, 17.77)},
}
#: SDPA flash's census name (``address_arithmetic="pytorch-flash"``) draws as flash-attn 2:
#: the same kernels.
DROPOUT_INSTRUCTIONS["pytorch-flash"] = DROPOUT_INSTRUCTIONS["none"]


def dropout_terms(family: str, phase: str, elems) -> dict:
    """Named terms of dropout over ``elems`` score elements in a ``phase`` (``"fwd"`` or
    ``"bwd"``) kernel of reference ``family`` (:data:`DROPOUT_INSTRUCTIONS`): ALU-pipe lane
    instructions and FMA-pipe FLOP slots."""
    alu, fma = DROPOUT_INSTRUCTIONS[family][phase]
    return {"alu/dropout (Philox, keep test)": elems * alu,
            "fp32/dropout (Philox, scale)": elems * FMA_SLOTS * fma}


#: ``"pytorch-flash"`` (SDPA flash: PyTorch's build of flash-attn 2, by its compiled head dims
#: 32, 64, 96, 128, 192, 256): the ALU- and FMA-pipe instructions its kernels issue beyond
#: the counted softmax, conversions, exp guards and bound checks — integer address and loop
#: arithmetic (IADD3, LEA, SHF, ISETP, IMAD), FSELs, and at d = 128 the MOVs beside its
#: register spills (18 M of its 31 M extra ALU warp instructions) — per score element: Nsight
#: Compute's ``sm__inst_executed_pipe_alu/fma`` minus the model's count at B = 1,
#: H = 4096 / d, N = 4096, bf16, non-causal (``summary.json``, ``summary-small-headdims.json``,
#: ``summary-flash-headdims.json``; the same per element at B = 4). Forward and backward.
ADDRESS_ARITHMETIC = {
    "pytorch-flash": {"fwd": {32: (0.42, 0.23), 64: (0.71, 0.26), 96: (0.65, 0.43),
                              128: (1.81, 0.44), 192: (0.96, 0.67), 256: (1.18, 0.49)},
                      "bwd": {32: (1.06, 0.75), 64: (1.87, 0.97), 96: (2.23, 1.73),
                              128: (3.00, 1.36), 192: (6.04, 3.44), 256: (8.95, 4.26)}},
    "xformers": {"fwd": {64: (12.17, 3.80), 128: (13.75, 4.62), 65536: (25.58, 8.94)},
                 "bwd": {64: (20.84, 5.80), 128: (30.07, 11.19), 65536: (94.39, 41.26)}},
    "cudnn": {"fwd": {64: (0.46, 0.11), 128: (0.52, 0.16), 192: (0.62, 0.09),
                      65536: (0.78, 0.04)},
              "bwd": {64: (3.79, 3.48), 128: (4.79, 4.76), 192: (11.01, 12.72),
                      65536: (11.70, 14.00)}},
}
