"""AttentionWorkload validation: one clear error naming the field and what is allowed."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

import perfsim

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
    w = W(batch=2, heads=8, seqlen_q=100, head_dim=64)
    with pytest.raises(ValidationError, match="frozen"):
        w.batch = 3
