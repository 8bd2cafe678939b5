#!/usr/bin/env bash
# Register spills of FlexAttention's backward by head dim (issue 9): Nsight Compute counters
# (local-memory bytes, registers, grid) through probe_ncu.sh, and the backward kernels that
# inductor generated (their BLOCK_M1/BLOCK_N1/BLOCK_M2/BLOCK_N2 and num_warps), on the lent H200:
#   run(command="bash validate/probe_spills.sh", carry=[".whl"])
# Writes $OUT/ncu/ncu.tgz, $OUT/inductor.tgz (the generated kernels) and $OUT/ncu.log.
set -u
OUT=${OUT:-/tmp/perfsim-spills}
mkdir -p "$OUT/inductor"
CASES=${CASES:-"flex-bwd-d192 flex-bwd-d64 flex-bwd-d256"} OUT=$OUT/ncu \
    bash "$(dirname "$0")/probe_ncu.sh" > "$OUT/ncu.log" 2>&1
for f in $(grep -rl "BLOCK_M1 : tl.constexpr" /tmp/torchinductor_* 2>/dev/null | grep "\.py$" | head -40); do
    cp "$f" "$OUT/inductor/$(basename "$(dirname "$f")")_$(basename "$f")"
done
grep -rhoE "(BLOCK_M1|BLOCK_N1|BLOCK_M2|BLOCK_N2|QK_HEAD_DIM|V_HEAD_DIM) *: *tl.constexpr *= *[0-9]+|'num_warps': [0-9]+|'num_stages': [0-9]+" \
    "$OUT/inductor" | sort | uniq -c | head -60
tail -5 "$OUT/ncu.log"
(cd "$OUT" && tar czf inductor.tgz inductor && rm -rf inductor)   # one file comes back, not dozens
