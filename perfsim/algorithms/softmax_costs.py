"""Non-matmul operation counts of the softmax family, per score element or per row.

Counted from the algorithms' pseudo-code (FA1 Algorithm 1, FA2 Algorithm 1/2, FA4 §3.1).
An FMA counts as 2 FLOP; a compare, max, add, multiply or select as 1.
"""

#: Online softmax, per score element: ``s·scale·log2e − m·scale·log2e`` as one FMA (2),
#: the running row max (1) and the row sum of P (1). The exp itself is a MUFU op.
ONLINE_SOFTMAX_FLOPS_PER_SCORE = 4

#: Per row and visited key tile, deferred normalisation (FA2): rescale the O row by
#: ``exp(m_old − m_new)`` (``d_v`` multiplies) and update ℓ with one FMA (2).
RESCALE_FLOPS_PER_ROW_EXTRA = 2

#: FA1 Algorithm 1 lines 11–12, per row and inner step: the O row is re-normalised each
#: step, ``diag(ℓ_new)^-1 (diag(ℓ_i) e^{m_i−m_new} O_i + e^{m̃−m_new} P̃ V)``: two scalings,
#: one add and one multiply by ``1/ℓ_new`` per element (4·d_v), plus ℓ_new (2 FMA = 4) and
#: the reciprocal (1) and max (1).
FA1_UPDATE_FLOPS_PER_ROW_EXTRA = 6
FA1_UPDATE_FLOPS_PER_ROW_ELEMENT = 4

#: MUFU exps per row and inner step: FA1 needs ``e^{m_i−m_new}`` and ``e^{m̃−m_new}`` (2);
#: FA2 needs ``e^{m_old−m_new}`` (1).
FA1_EXPS_PER_ROW_STEP = 2
FA2_EXPS_PER_ROW_STEP = 1

#: Causal mask on a diagonal tile: one compare/select per score element.
MASK_FLOPS_PER_SCORE = 1

#: Backward, per score element (FA2 Algorithm 2): recompute ``P = exp(S·scale − LSE)`` as one
#: FMA (2) and ``dS = P ∘ (dP − D)`` as a subtract and a multiply (2).
BWD_FLOPS_PER_SCORE = 4

#: Fused softmax kernel (eager ``torch.softmax``), per element: max (1), subtract (1),
#: sum (1), divide (1); the exp is a MUFU op.
FUSED_SOFTMAX_FLOPS = 4

#: Softmax backward ``dS = P ∘ (dP − rowsum(dP ∘ P))``: multiply, sum, subtract, multiply.
SOFTMAX_BWD_FLOPS = 4
