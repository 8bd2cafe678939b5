"""The tick-clock probe's window arithmetic (validate/probe_tick_clock.py), on made-up samples
(the probe itself needs a GPU)."""

import pytest

from perfsim.validate import probe_tick_clock as ptc


def test_windows_give_cycles_over_nanoseconds_after_the_settle_point():
    # 1.5 GHz for 2 s then 1.8 GHz, one sample every 5 us
    t, c, cycles = [], [], 0
    for i in range(800_000):
        ns = i * 5_000
        t.append(ns)
        c.append(cycles)
        cycles += int(5_000 * (1.5 if ns < 2e9 else 1.8))
    before = ptc._windows(t, c, 0)
    after = ptc._windows(t, c, int(2.1e9))
    assert before[0] == pytest.approx(1.5e9, rel=1e-6)
    assert all(w == pytest.approx(1.8e9, rel=1e-6) for w in after)
    # windows are WINDOW_S long and never run past the last sample
    assert len(after) == int((t[-1] - 2.1e9) / (ptc.WINDOW_S * 1e9))


def test_committed_tick_utilization_table_is_what_the_model_gives():
    """reports/h200/probes/tick/utilization.md (validate/tick_utilization.py) is current."""
    from pathlib import Path

    from perfsim.validate import tick_utilization as tu

    committed = (Path(tu.__file__).resolve().parent
                 / "reports/h200/probes/tick/utilization.md").read_text()
    found = tu.rows()
    assert {r["impl"] for r in found} == set(tu.IMPLS)
    assert tu.table(found) in committed
