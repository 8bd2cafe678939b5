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
