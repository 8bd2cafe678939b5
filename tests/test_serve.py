"""perfsim serve: the explorer's views agree with perfsim.predict, in Python and in a real
browser (headless Chromium driven by Playwright; issue 14)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import perfsim

pytest.importorskip("panel")
from perfsim.serve import Explorer, create_app, format_seconds, result_id  # noqa: E402

CHROMIUM = os.environ.get("PERFSIM_CHROMIUM", "/usr/bin/chromium")


def test_table_and_what_if_match_predict():
    ex = Explorer()
    w = perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=4096, head_dim=128)
    html = ex.table_html()
    for gid in ex.gpus:
        want = format_seconds(perfsim.predict(w, gid, "fa2").seconds)
        assert f"id='{result_id(gid)}'>{want}<" in html
    # doubling HBM bandwidth makes every HBM-bound decode step faster (and none slower),
    # and the table shows the what-if GPU's prediction
    ex.param.update(seqlen_q=1, seqlen_k=65536, kv_heads=4, algorithm="flash-attn-2")
    before = dict((g, p) for g, p in ex.predictions())
    ex.hbm_bandwidth_bytes_per_s = 2.0
    after = dict((g, p.seconds) for g, p in ex.predictions())
    assert all(after[g] <= before[g].seconds for g in ex.gpus)
    hbm_bound = [g for g in ex.gpus if before[g].bound == "hbm"]
    assert hbm_bound and all(after[g] < before[g].seconds for g in hbm_bound)
    spec = perfsim.load_gpu("h200-sxm")
    spec = spec.replace(hbm_bandwidth_bytes_per_s=2 * spec.hbm_bandwidth_bytes_per_s)
    assert after["h200-sxm"] == perfsim.predict(ex.workload(), spec, "flash-attn-2").seconds
    assert "HBM bandwidth ×2" in ex.table_html()


def test_views_render_and_bad_input_is_one_message():
    ex = Explorer(gpus=["a100-sxm4-80gb", "h100-sxm5"], algorithm="fa3", causal=True)
    assert "cannot run" in ex.table_html()          # no FA3 on the A100, said in its row
    frame = ex.sweep_frame()
    assert set(frame.gpu) == {"a100-sxm4-80gb", "h100-sxm5"}
    for fig in (ex.time_figure(), ex.roofline_figure(), ex.curve_figure(frame),
                ex.map_figure(frame)):
        assert fig.axes
    ex.param.update(algorithm="sdpa-cudnn", gpus=["h200-sxm"], causal=False, dropout_p=0.1)
    (gid, p), = ex.predictions()                      # the dropout control reaches predict
    assert p.seconds == perfsim.predict(ex.workload(), "h200-sxm", "sdpa-cudnn").seconds
    assert p.workload.dropout_p == 0.1 and set(ex.sweep_frame().dropout_p) == {0.1}
    ex.algorithm = "flash-attn-cute"                  # no dropout: refused in its row
    assert "cannot run" in ex.table_html() and "dropout" in ex.table_html()
    ex.param.update(algorithm="fa3", dropout_p=0.0)
    ex.kv_heads = 5                                   # does not divide 16
    with pytest.raises(perfsim.PerfsimError, match="kv_heads"):
        ex.workload()
    assert create_app(ex) is not None


def test_every_clock_scale_of_the_slider_gives_valid_gpus():
    # the slider reaches 0.1: the power model's floor moves down with the clocks, so no
    # catalog GPU's what-if is refused for a floor above its own maximum clock
    from perfsim.serve import catalog

    for scale in (0.1, 0.3, 0.6, Explorer.param.clock_hz.bounds[1]):
        ex = Explorer(clock_hz=scale, gpus=list(catalog()))
        refused = [(g, p) for g, p in ex.predictions() if isinstance(p, str)]
        assert not [r for r in refused if "min_clock_hz" in r[1]], refused
    spec, = Explorer(clock_hz=0.5, gpus=["h100-sxm5"]).specs()
    base = perfsim.load_gpu("h100-sxm5")
    assert spec.power.min_clock_hz == 0.5 * base.power.min_clock_hz
    assert spec.max_clock_hz == 0.5 * base.max_clock_hz


def test_downloads_in_a_state_no_view_can_show_say_why():
    import panel as pn

    ex = Explorer(kv_heads=5)                         # does not divide 16
    app = create_app(ex)
    buttons = [w for w in app.select(pn.widgets.FileDownload)]
    notice, = [a for a in app.select(pn.pane.Alert) if not a.visible]
    assert len(buttons) >= 3
    for button in buttons:
        body = button.callback().read().decode()
        assert body.startswith("perfsim: error:") and "kv_heads" in body
        assert notice.visible and "kv_heads" in notice.object
    ex.kv_heads = 4
    assert buttons[0].callback().read().startswith(b"batch,")
    assert not notice.visible


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _browser_available() -> bool:
    try:
        import playwright  # noqa: F401
    except ImportError:
        return False
    return Path(CHROMIUM).exists()


@pytest.mark.skipif(not _browser_available() and not os.environ.get("PERFSIM_REQUIRE_BROWSER"),
                    reason="needs playwright and Debian's chromium (.ci/run installs both)")
def test_explorer_in_a_real_browser(tmp_path):
    """Serve the explorer, load it in headless Chromium, change the query length, wait for
    the table, read the predicted time and compare it with perfsim.predict; the URL holds
    the new state. A screenshot goes to $PERFSIM_SCREENSHOT_DIR (or the test's tmp dir)."""
    from playwright.sync_api import sync_playwright

    port = _free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    server = subprocess.Popen([sys.executable, "-m", "perfsim", "serve", "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.time() + 90
        while True:
            try:
                urllib.request.urlopen(url, timeout=5)
                break
            except OSError:
                if time.time() > deadline or server.poll() is not None:
                    raise AssertionError("the explorer did not start") from None
                time.sleep(0.5)
        w = perfsim.AttentionWorkload(batch=4, heads=16, seqlen_q=4096, head_dim=128)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url)
            cell = page.locator(f"#{result_id('h100-sxm5')}")
            cell.wait_for(timeout=60_000)
            first = format_seconds(perfsim.predict(w, "h100-sxm5", "fa2").seconds)
            assert cell.inner_text() == first
            field = page.locator(".w-seqlen_q input")
            field.fill("8192")
            field.press("Enter")
            want = format_seconds(perfsim.predict(w.replace(seqlen_q=8192), "h100-sxm5",
                                                  "fa2").seconds)
            deadline = time.time() + 60
            while cell.inner_text() != want and time.time() < deadline:
                time.sleep(0.2)
            assert cell.inner_text() == want
            assert "seqlen_q=8192" in page.url
            shots = Path(os.environ.get("PERFSIM_SCREENSHOT_DIR", tmp_path))
            shots.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shots / "explorer.png"))
            browser.close()
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()


def test_ctrl_c_stops_the_explorer_as_every_command():
    # Panel's own SIGINT handler stopped the server and `perfsim serve` exited 0, silently
    import signal

    port = _free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    server = subprocess.Popen([sys.executable, "-m", "perfsim", "serve", "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                              text=True)
    try:
        deadline = time.time() + 90
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5)
                break
            except OSError:
                if time.time() > deadline or server.poll() is not None:
                    raise AssertionError("the explorer did not start") from None
                time.sleep(0.5)
        server.send_signal(signal.SIGINT)
        _out, err = server.communicate(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
    assert server.returncode == 130
    assert "perfsim: interrupted" in err and "Traceback" not in err and "W-1005" not in err


def test_the_clock_slider_keeps_every_catalog_gpu_valid():
    """The slider's top scale times each catalog GPU's boost clock stays within the range a
    GPUSpec accepts, so no position of it turns the explorer's views into errors."""
    from perfsim.gpu import FIELD_RANGES
    from perfsim.serve import Explorer

    top = Explorer.param["clock_hz"].bounds[1]
    assert top >= 1.5                          # still a what-if worth having
    assert all(perfsim.load_gpu(g).max_clock_hz * top <= FIELD_RANGES["max_clock_hz"][1]
               for g in perfsim.gpus())


def test_a_shared_link_applies_its_good_values_and_names_the_bad_ones():
    """A link with one value its parameter refuses kept every other value of the link at its
    default, and said nothing (Panel's Location.sync updates all or nothing, silently)."""
    from panel.util import parse_query

    from perfsim.serve import apply_query

    ex = Explorer()
    query = parse_query("?batch=8&seqlen_q=abc&causal=true&gpus=%5B%22b200%22%5D&clock_hz=50"
                        "&algorithm=fa9&utm_source=x")
    problems = apply_query(ex, query)
    assert (ex.batch, ex.causal, ex.gpus) == (8, True, ["b200"])      # the good ones applied
    assert (ex.seqlen_q, ex.clock_hz, ex.algorithm) == (4096, 1.0, "fa2")   # the bad ones kept
    assert problems[0] == "seqlen_q='abc' (allowed: an integer from 1 to 4194304); kept 4096"
    assert problems[1].startswith("clock_hz=50 (allowed: a number from 0.1 to ")
    assert problems[2].startswith("algorithm='fa9' (allowed: one of standard, fa1, fa2, ")
    assert "triton-tutorial" in problems[2]                        # every name, none cut
    assert len(problems) == 3                                      # utm_source: not ours


@pytest.mark.parametrize("query, problem", [
    # the app writes window_left=-1 into every link; parse_query reads it back as -1.0
    ("?window_left=-1&batch=8.0", None),
    # param takes True as 1: the views then failed on "batch must be an integer, not bool"
    ("?batch=true", "batch=True (true/false is not a number; allowed: an integer from 1 to "),
    ("?dropout_p=false", "dropout_p=False (true/false is not a number; allowed: a number "),
    # the curve and the bottleneck map refused these after they were applied
    ("?gpus=%5B%5D", "gpus=[] (no GPU; allowed: "),
    ('?gpus=["b200","b200"]', "gpus=['b200', 'b200'] (a GPU named twice; allowed: "),
    ('?gpus=["b200","nope"]', "gpus=['b200', 'nope'] (not catalog GPUs: 'nope'; allowed: "),
])
def test_a_link_value_a_view_would_refuse_is_named(query, problem):
    """A fresh user's findings on the link handling: whole floats for integer fields were
    refused with a message that allowed them; booleans and empty or repeated GPU lists were
    applied, and the views failed on them."""
    from panel.util import parse_query

    from perfsim.serve import apply_query

    ex = Explorer()
    problems = apply_query(ex, parse_query(query))
    if problem is None:
        assert problems == [] and (ex.window_left, ex.batch) == (-1, 8)
        assert isinstance(ex.batch, int)
    else:
        assert len(problems) == 1 and problems[0].startswith(problem), problems
        assert ex.param.values() == Explorer().param.values() | {"name": ex.name}
