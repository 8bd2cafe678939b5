"""The L2's time per TMA row segment (GPUSpec.tma_segment_seconds,
perfsim.algorithms.common.tma_request_seconds): the swizzle rule, the sector rule, the floor it
puts under a kernel's memory path, and where it does not apply. Rules, not figures."""

from __future__ import annotations

import pytest

import perfsim
from perfsim.algorithms.common import tma_request_seconds, tma_segment_bytes
from perfsim.errors import PerfsimError

H200 = perfsim.load_gpu("h200-sxm")
NO_TABLE = H200.replace(tma_segment_seconds=None)


@pytest.mark.parametrize(("elements", "element_bytes", "segment"), [
    (256, 2, 128), (192, 2, 128), (128, 2, 128), (64, 2, 128),   # rows of 1024-bit multiples
    (224, 2, 64), (160, 2, 64), (96, 2, 64),                     # 512-bit multiples
    (240, 2, 32), (208, 2, 32), (144, 2, 32), (80, 2, 32),       # 256-bit multiples
    (256, 1, 128), (128, 1, 128), (64, 1, 64), (96, 1, 32)])     # fp8 rows
def test_segment_width_follows_cutlass_swizzle_rule(elements, element_bytes, segment):
    assert tma_segment_bytes(elements, element_bytes) == segment


def test_rows_sixteen_bytes_off_a_sector_take_the_half_entry():
    table = H200.tma_segment_seconds
    # a 240-wide tile (32-byte segments, 15 per row) over rows of 232 elements (464 bytes)
    assert tma_request_seconds(H200, [(1000, 240, 232, 2)]) == pytest.approx(
        1000 * 15 * table["32/half"])
    # ... and over rows of 240 (480 bytes: whole sectors)
    assert tma_request_seconds(H200, [(1000, 240, 240, 2)]) == pytest.approx(
        1000 * 15 * table["32"])
    # a 256-wide tile over 232-element rows: four 128-byte segments per row
    assert tma_request_seconds(H200, [(10, 256, 232, 2)]) == pytest.approx(
        10 * 4 * table["128/half"])
    assert tma_request_seconds(NO_TABLE, [(10, 256, 232, 2)]) == 0


def test_the_table_is_checked():
    full = dict(H200.tma_segment_seconds)
    for bad, why in (({**full, "256": 1e-11}, "unknown key"),
                     ({**full, "128": "1e-11"}, "number"),
                     ({**full, "128": -1e-11}, "between"), ({**full, "128": True}, "number"),
                     ({"128": 1.4e-11}, "missing: 64, 32, 128/half")):
        with pytest.raises((PerfsimError, ValueError), match=why):
            H200.replace(tma_segment_seconds=bad)
    # integer keys read as their text; an empty table is no table
    assert H200.replace(tma_segment_seconds={int(k) if k.isdigit() else k: v
                                             for k, v in full.items()}
                        ).tma_segment_seconds == full
    assert _fwd(232, H200.replace(tma_segment_seconds={})).seconds == pytest.approx(
        _fwd(232, NO_TABLE).seconds, rel=1e-12)


def test_a_dotted_override_on_a_gpu_without_the_table_says_so():
    with pytest.raises(PerfsimError, match="b200 has no tma_segment_seconds table"):
        perfsim.sweep(batch=2, heads=8, seqlen_q=4096, head_dim=232, gpus=["b200"],
                      algorithms="flash-attn-cute",
                      overrides={"tma_segment_seconds.32": [1e-11]})


def test_paged_kv_gathered_with_cp_async_adds_no_segments():
    def floor(page_size):
        w = perfsim.AttentionWorkload(batch=2, heads=8, seqlen_q=4096, head_dim=232,
                                      page_size=page_size)
        p = perfsim.predict(w, gpu=H200, algorithm="flash-attn-cute")
        return max(p.kernels, key=lambda k: k.seconds).cost.l2_request_seconds
    # the forward's key tile at head dim 232 is 80 rows: a page of 80 keeps TMA
    assert floor(80) == pytest.approx(floor(None))
    assert 0 < floor(16) < 0.05 * floor(None)          # Q's rows only


def test_rows_tma_cannot_describe_add_nothing():
    assert tma_request_seconds(H200, [(1000, 80, 72, 1)]) == 0      # 72-byte fp8 rows


def _fwd(d, gpu, algo="flash-attn-cute", phase="fwd"):
    w = perfsim.AttentionWorkload(batch=2, heads=8, seqlen_q=4096, head_dim=d, phase=phase)
    return perfsim.predict(w, gpu=gpu, algorithm=algo)


def test_a_thirty_two_byte_swizzle_on_offset_rows_binds_the_forward():
    # head dim 232: flash_attn.cute's forward tile is 240 wide (32-byte swizzle) over rows of
    # 464 bytes; the L2's time for its K/V segments is the longest part of the kernel
    with_floor, without = _fwd(232, H200), _fwd(232, NO_TABLE)
    main = max(with_floor.kernels, key=lambda k: k.seconds)
    assert main.cost.l2_request_seconds > 0
    assert main.bound == "hbm"
    assert with_floor.seconds > 1.2 * without.seconds


@pytest.mark.parametrize("d", [256, 192, 128, 64])
def test_whole_sector_rows_in_128_byte_segments_leave_the_forward_alone(d):
    assert _fwd(d, H200).seconds == pytest.approx(_fwd(d, NO_TABLE).seconds, rel=1e-12)


def test_only_tma_kernels_on_gpus_with_the_table_pay_it():
    # flash-attn 2 and FlexAttention load with cp.async: no floor
    for algo in ("fa2", "flex", "sdpa-flash"):
        cost = max(_fwd(232, H200, algo).kernels, key=lambda k: k.seconds).cost
        assert cost.l2_request_seconds == 0
    # FA3 on a GPU without the table (the A100 has no TMA; the B200 runs FA4): none
    assert perfsim.load_gpu("a100-sxm4-80gb").tma_segment_seconds is None
    assert perfsim.load_gpu("b200").tma_segment_seconds is None


def test_the_floor_is_a_fixed_time_not_scaled_with_the_clock():
    w = perfsim.AttentionWorkload(batch=2, heads=8, seqlen_q=4096, head_dim=232)
    slow = perfsim.predict(w, H200, "flash-attn-cute",
                           timing=perfsim.timing_for(H200, "flash-attn-cute", clock=1.2e9))
    fast = perfsim.predict(w, H200, "flash-attn-cute",
                           timing=perfsim.timing_for(H200, "flash-attn-cute", clock=1.8e9))
    floor = max(fast.kernels, key=lambda k: k.seconds).cost.l2_request_seconds
    assert max(slow.kernels, key=lambda k: k.seconds).cost.l2_request_seconds == floor
    assert fast.unit_seconds["hbm"] >= floor


def test_explain_names_the_l2_requests_when_they_bind():
    text = _fwd(232, H200).explain()
    assert "Bound by the L2's TMA requests" in text
    assert "tma_segment_seconds" in text
    assert "L2's TMA requests" not in _fwd(256, H200).explain()
    # a fwd_bwd whose forward is bound there names it beside the backward
    both = _fwd(232, H200, phase="fwd_bwd").explain()
    assert "fa3_fwd's 'hbm' time" in both and "TMA loads row segment" in both


def test_the_compute_bound_length_sees_the_floor():
    from perfsim.symbolic import compute_bound_seqlen

    at = dict(batch=2, heads=8, head_dim=232, max_seqlen=2**16)
    # without the table the tensor time passes the HBM time; with it the L2's segments
    # stay longer than the MMAs at every length
    assert compute_bound_seqlen("flash-attn-cute", NO_TABLE, **at) is not None
    assert compute_bound_seqlen("flash-attn-cute", H200, **at) is None
