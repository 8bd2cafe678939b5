"""The general hold-out grid is the seeded draw it says it is, and shares no shape with an
earlier grid (validate/draw_holdout.py)."""

import json
import shutil

import pytest

from perfsim.validate import draw_holdout


def test_holdout53_is_the_seeded_draw(tmp_path):
    committed = draw_holdout.GRID_DIR / "external_holdout53.json"
    for f in draw_holdout.GRID_DIR.glob("*.json"):
        if f != committed:
            shutil.copy(f, tmp_path)
    earlier = {draw_holdout._key(s) for f in tmp_path.glob("*.json")
               for s in json.loads(f.read_text())}
    drawn = draw_holdout.draw(53, 16, tmp_path)
    assert drawn == json.loads(committed.read_text())
    assert not earlier & {draw_holdout._key(s) for s in drawn}
    assert {s["head_dim"] for s in drawn} == {64, 128, 256}
    lengths = sorted(s["seqlen_q"] for s in drawn)
    assert lengths[0] < 256 and lengths[-1] > 8192
    # the documented command, writing over the committed file, draws it again
    assert draw_holdout.draw(53, 16, skip=committed) == drawn


def test_count_is_checked():
    for bad in (0, -3, draw_holdout.MAX_COUNT + 1):
        with pytest.raises(ValueError, match="count must be"):
            draw_holdout.draw(1, bad)



def test_the_main_grid_is_excluded():
    """A draw never returns a main-grid shape: seed 59, drawn as hold-out 59 was (its own file
    left out), met B = 64, H = 8, N = 256, d = 256 causal before the main grid, built in code,
    was excluded (its rows were taken out of that hold-out); now it draws another shape there,
and the later draws differ from the committed ones."""
    from perfsim.validate.external import external_grid

    main = {s.key for s in external_grid()}
    out = draw_holdout.GRID_DIR / "external_holdout59.json"
    drawn = draw_holdout.draw(59, 16, skip=out)
    assert not {draw_holdout._key(s) for s in drawn} & main
    # up to the shape it now passes over, the draw is hold-out 59's as committed
    kept = json.loads(out.read_text())
    assert drawn[:10] == kept[:10]
    assert {"batch": 64, "heads": 8, "seqlen_q": 256, "head_dim": 256,
            "causal": True} not in drawn


def test_a_head_dim_pool_is_drawn_from_and_checked():
    """``head_dims``: each shape's head dim comes from the pool (hold-out 60 is that draw, at
    head dims between flash-attn 2's compiled ones); a head dim off a multiple of 8 is
    refused."""
    pool = (40, 48, 56, 72, 80, 88, 104, 112, 120, 136, 144, 152, 160, 168, 176, 184, 200,
            208, 216, 224, 232, 240, 248)
    out = draw_holdout.GRID_DIR / "external_holdout60.json"
    drawn = draw_holdout.draw(60, 12, skip=out, head_dims=pool)
    assert drawn == json.loads(out.read_text())
    assert {s["head_dim"] for s in drawn} <= set(pool)
    for bad in ((), (40, 41), (0,), (True,)):
        with pytest.raises(ValueError, match="multiples of 8"):
            draw_holdout.draw(1, 2, head_dims=bad)
