"""The trace parsing of ``validate/probe_small_calls.py`` (no GPU): calls between pairs of
``cudaEventRecord`` calls, kernels matched to their launches by correlation id."""

from perfsim.validate.probe_small_calls import calls_from_trace, summary


def _api(name, ts, corr, cat="cuda_runtime"):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": 1.0,
            "args": {"correlation": corr}}


def _kernel(name, ts, dur, corr):
    return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur,
            "args": {"correlation": corr}}


def test_calls_and_their_kernels():
    events = [
        _api("cudaEventRecord", 100.0, 1),
        _api("cuLaunchKernelEx", 112.0, 2, cat="cuda_driver"),   # the main kernel
        _api("cudaLaunchKernel", 118.0, 3),                      # a kernel after it
        _api("cudaEventRecord", 130.0, 4),
        _kernel("main", 120.0, 30.0, 2),
        _kernel("post", 150.0, 2.0, 3),
        # a second call with one kernel, and a kernel launched outside any call
        _api("cudaEventRecord", 300.0, 5),
        _api("cudaLaunchKernel", 305.0, 6),
        _api("cudaEventRecord", 320.0, 7),
        _kernel("main", 310.0, 40.0, 6),
        _api("cudaLaunchKernel", 400.0, 8),
        _kernel("stray", 405.0, 1.0, 8),
    ]
    calls = calls_from_trace(events)
    assert [c["host_us"] for c in calls] == [30.0, 20.0]
    first = calls[0]["kernels"]
    assert [k["name"] for k in first] == ["main", "post"]
    assert first[0]["launch_us"] == 12.0 and first[0]["start_us"] == 20.0
    assert [k["name"] for k in calls[1]["kernels"]] == ["main"]
    s = summary(calls)
    assert s["kernels"] == 1.5 and s["main_dur_us"] == 35.0
    # the longest kernel's start and the kernels after it
    assert s["main_start_us"] == 15.0 and s["after_main_us"] == 1.0
    assert s["last_end_us"] == (52.0 + 50.0) / 2
