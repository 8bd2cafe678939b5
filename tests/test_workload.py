"""AttentionWorkload validation: one clear error naming the field and what is allowed."""

from __future__ import annotations

import pytest

import perfsim
from perfsim.errors import PerfsimError

W = perfsim.AttentionWorkload


def test_defaults_follow_the_query_side():
    w = W(batch=2, heads=8, seqlen_q=100, head_dim=64)
    assert (w.kv_heads, w.seqlen_k, w.head_dim_v) == (8, 100, 64)
    assert w.replace(seqlen_q=50).seqlen_k == 50          # a derived default stays derived
    assert w.replace(seqlen_k=7, seqlen_q=50).seqlen_k == 7


@pytest.mark.parametrize("kwargs,field,allowed", [
    ({"kv_heads": 3}, "kv_heads", "must divide heads"),
    ({"dtype": "fp64"}, "dtype", "fp32"),
    ({"phase": "train"}, "phase", "fwd_bwd"),
    ({"batch": 0}, "batch", "greater than or equal to 1"),
    ({"dropout_p": 1.0}, "dropout_p", "less than 1"),
    ({"head_dim": -64}, "head_dim", "greater than or equal to 1"),
    ({"flash": True}, "flash", "has no field flash; fields: batch, heads"),
])
def test_bad_values_name_the_field(kwargs, field, allowed):
    base = dict(batch=2, heads=8, seqlen_q=100, head_dim=64)
    with pytest.raises(perfsim.PerfsimError) as err:
        W(**{**base, **kwargs})
    message = str(err.value)
    assert field in message and allowed in message and "\n" not in message


def test_workload_is_frozen():
    """Setting a field gives perfsim's one-line error naming replace() (a reviewer met
    pydantic's raw ValidationError); so does a GPU spec's."""
    w = W(batch=2, heads=8, seqlen_q=100, head_dim=64)
    with pytest.raises(PerfsimError, match=r"immutable.*w\.replace\(batch=\.\.\.\)"):
        w.batch = 3
    with pytest.raises(PerfsimError, match="immutable"):
        del w.batch
    gpu = perfsim.load_gpu("h100-sxm5")
    with pytest.raises(PerfsimError, match=r"immutable.*gpu\.replace\(sm_count=\.\.\.\)"):
        gpu.sm_count = 3
    with pytest.raises(PerfsimError, match="has no field 'batchsize'.*fields: batch, heads"):
        w.batchsize = 3
    assert w.batch == 2 and gpu.sm_count == 132


def test_replace_moves_a_field_with_its_source_only_where_it_was_left_to_follow():
    """Review finding: replace() treated any seqlen_k equal to seqlen_q as following it, so a
    prefill given N_k = 4096 explicitly became a decode against a one-token cache."""
    from perfsim import AttentionWorkload

    given = AttentionWorkload(batch=1, heads=8, kv_heads=8, seqlen_q=4096, seqlen_k=4096,
                              head_dim=64, head_dim_v=64, dtype="bf16", kv_dtype="bf16")
    step = given.replace(seqlen_q=1, heads=16, head_dim=128, dtype="fp16")
    assert (step.seqlen_k, step.kv_heads, step.head_dim_v, step.kv_dtype) == (4096, 8, 64,
                                                                             "bf16")
    left = AttentionWorkload(batch=1, heads=8, seqlen_q=4096, head_dim=64)
    step = left.replace(seqlen_q=1, heads=16, head_dim=128, dtype="fp16")
    assert (step.seqlen_k, step.kv_heads, step.head_dim_v, step.kv_dtype) == (1, 16, 128,
                                                                             "fp16")
    # still following after a replace, and a None given is "not given"
    assert step.replace(seqlen_q=7).seqlen_k == 7
    none = AttentionWorkload(batch=1, heads=8, kv_heads=None, seqlen_q=64, head_dim=64)
    assert none.replace(heads=16).kv_heads == 16


def test_dtype_and_phase_names_are_taken_in_any_case():
    from perfsim import AttentionWorkload
    w = AttentionWorkload(batch=1, heads=8, seqlen_q=64, head_dim=64, dtype="FP16",
                          phase="Fwd_Bwd", kv_dtype="FP8_E4M3")
    assert (w.dtype, w.phase, w.kv_dtype) == ("fp16", "fwd_bwd", "fp8_e4m3")
