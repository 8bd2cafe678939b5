"""Target program for Nsight Compute: one profiled launch of each named ``power_probe``
benchmark (``walk_tma_l2``, ``walk_tma_l2_g8``, ...), so that ncu counts the L2 bytes each
moves (``lts__t_bytes``: whether L2 serves a line that several SMs read in step once or once
per SM). Not attention.

    ncu --profile-from-start off --metrics lts__t_bytes.sum,dram__bytes.sum,... \\
        python3 -m perfsim.validate.probe_tile_walk_ncu walk_tma_l2 walk_tma_l2_g8
"""

from __future__ import annotations

import sys


def main(argv=None) -> int:
    from perfsim.validate.power_probe import _benches
    from perfsim.validate.probe_ncu import _profile_once

    benches = _benches()
    for name in (argv if argv is not None else sys.argv[1:]):
        step, ops, unit, desc = benches[name]()
        _profile_once(step)
        print(name, ops, unit, desc, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
