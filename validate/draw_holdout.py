"""Draw a general hold-out grid at random, reproducibly, from the range the accuracy issue
names (head dims 64 / 128 / 256, N from 128 to 16k, causal or not, GQA, bf16 and fp16), none
of it a shape of the main grid (``external.external_grid``, built in code) or of another grid
in ``grids/`` (the output file itself is left out of that check, so the command below
rewrites hold-out 53 as committed; a grid drawn later excludes this one's shapes, so it never
changes this draw). Before 2026-12-06 the main grid was not excluded: hold-out 59's draw met
one of its shapes, which was measured and then taken out of that hold-out.

    python -m perfsim.validate.draw_holdout --seed 53 --count 16 \
        --out validate/grids/external_holdout53.json

Sequence lengths are stratified: shape i of ``count`` gets N = 2^(7 + 7·(k + u)/count) for a
shuffled slot k and u uniform in [0, 1), rounded to a multiple of 64 (at least 128), so the
draw covers 128-16k on a log scale; head dims cycle 64, 128, 256, 128; batch is the nearest
integer to a log-uniform 4k-32k tokens over N (at most 64); heads from {8, 12, 16, 24, 32, 40};
a GQA group of 1 (three times as likely), 2, 4 or 8 when it divides the heads; causal with
probability 1/2; fp16 with probability 0.3, else bf16. Python's ``random.Random(seed)`` fixes
the draw. ``count`` is 1-1000; a draw that keeps meeting shapes it already has stops with an
error rather than looping. ``--head-dims 40,48,...`` draws each head dim from that list instead
(hold-out 60, head dims between flash-attn 2's compiled ones)::

    python -m perfsim.validate.draw_holdout --seed 60 --count 12 --head-dims \
        40,48,56,72,80,88,104,112,120,136,144,152,160,168,176,184,200,208,216,224,232,240,248 \
        --out validate/grids/external_holdout60.json
"""

from __future__ import annotations

import argparse
import json
import numbers
import random
from pathlib import Path

from perfsim.validate.shapes import Shape

GRID_DIR = Path(__file__).parent / "grids"


def _key(s: dict) -> str:
    """A shape's identity: ``Shape.key`` (lengths, heads, head dim, mask, dtype, dropout)."""
    return Shape(**s).key


MAX_COUNT = 1000
#: candidates drawn per shape asked for before giving up
MAX_TRIES_PER_SHAPE = 1000


def draw(seed: int, count: int, grid_dir: Path = GRID_DIR, skip: Path | None = None,
         head_dims: tuple[int, ...] | None = None) -> list[dict]:
    """``count`` shapes (dicts of ``Shape`` fields, phase left out) drawn with ``seed``,
    none of them in a grid file of ``grid_dir`` other than ``skip``. ``head_dims``: draw each
    shape's head dim uniformly from these instead of cycling 64, 128, 256, 128 (a hold-out
    aimed at other head dims, e.g. those between flash-attn 2's compiled ones).

    Raises:
        ValueError: ``count`` outside 1-:data:`MAX_COUNT`, a head dim not a positive
            multiple of 8, or the draw keeps meeting shapes it already has
            (:data:`MAX_TRIES_PER_SHAPE` candidates per shape).
    """
    if not 1 <= count <= MAX_COUNT:
        raise ValueError(f"count must be 1-{MAX_COUNT}, got {count}")
    if head_dims is not None and (not head_dims or any(
            isinstance(d, bool) or not isinstance(d, numbers.Integral) or d <= 0 or d % 8
            for d in head_dims)):
        raise ValueError(f"head dims must be positive multiples of 8, got {head_dims}")
    skip = skip.resolve() if skip is not None else None
    from perfsim.validate.external import external_grid

    seen = {_key(s) for f in sorted(grid_dir.glob("*.json")) if f.resolve() != skip
            for s in json.loads(f.read_text())}
    seen |= {s.key for s in external_grid()}     # (phase fwd, as Shape(**drawn))
    rng = random.Random(seed)
    slots = list(range(count))
    rng.shuffle(slots)
    out: list[dict] = []
    tries = 0
    while len(out) < count:
        tries += 1
        if tries > MAX_TRIES_PER_SHAPE * count:
            raise ValueError(f"seed {seed}: {tries - 1} candidates gave {len(out)} new shapes "
                             f"of {count}; ask for fewer")
        slot = slots[len(out)]
        d = (64, 128, 256, 128)[len(out) % 4] if head_dims is None else int(rng.choice(head_dims))
        n = max(128, round(2 ** (7 + 7 * (slot + rng.random()) / count) / 64) * 64)
        h = rng.choice([8, 12, 16, 24, 32, 40])
        group = rng.choice([1, 1, 1, 2, 4, 8])
        if h % group:
            group = 1
        batch = min(64, max(1, round(2 ** rng.uniform(12, 15) / n)))
        causal = rng.random() < 0.5
        dtype = "fp16" if rng.random() < 0.3 else "bf16"
        shape = {"batch": batch, "heads": h, "seqlen_q": n, "head_dim": d, "causal": causal}
        if group > 1:
            shape["kv_heads"] = h // group
        if dtype != "bf16":
            shape["dtype"] = dtype
        if _key(shape) in seen:
            continue
        seen.add(_key(shape))
        out.append(shape)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--count", type=int, default=16)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--head-dims", default=None,
                    help="comma-separated head dims to draw from (multiples of 8); default: "
                         "cycle 64, 128, 256, 128")
    args = ap.parse_args(argv)
    head_dims = None
    if args.head_dims is not None:
        try:
            head_dims = tuple(int(x) for x in args.head_dims.split(","))
        except ValueError:
            ap.error(f"--head-dims {args.head_dims!r}: give integers separated by commas")
    if not args.out.parent.is_dir():
        ap.error(f"--out {args.out}: folder {args.out.parent} does not exist")
    try:
        shapes = draw(args.seed, args.count, skip=args.out, head_dims=head_dims)
    except ValueError as exc:
        ap.error(str(exc))
    try:
        args.out.write_text("[\n" + ",\n".join(" " + json.dumps(s) for s in shapes) + "\n]\n")
    except OSError as exc:
        ap.error(f"--out {args.out}: cannot write it ({exc.strerror or exc})")
    print(f"{len(shapes)} shapes -> {args.out}")


if __name__ == "__main__":
    main()
