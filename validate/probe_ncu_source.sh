#!/usr/bin/env bash
# Where a kernel's warps stall, instruction by instruction (issue 9: flash-attn 2's short causal
# forward waits on `no_instruction`; validate/README.md, "Hold-out 59, and flash-attn 2's short
# causal forward against straight-line code"). Nsight Compute's warp-state sampling per SASS
# instruction (section SourceCounters) for each case of validate/probe_ncu.py:
#   OUT=DIR [CASES="..."] [KERNEL=regex] bash validate/probe_ncu_source.sh
# Writes DIR/CASE-source.csv.gz (the source page as SASS, one row per instruction with its
# address and its samples by stall reason) and DIR/ncu-source.log; summarised by
# `python -m perfsim.validate.stall_regions DIR/CASE-source.csv.gz` (the main loop and the code
# before and after it, from validate/sass_loops.py's reading of the same kernel).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/perfsim-ncu-source}
mkdir -p "$OUT"
. validate/ncu_env.sh
CASES=${CASES:-"flash-fwd-d128-n448-b8-h16-c flash-fwd-d128-n448-b8-h16 flash-fwd-d128-n512-b8-h16-c"}
for c in $CASES; do
    timeout 200 "$NCU" --clock-control none --profile-from-start off \
        --kernel-name "regex:${KERNEL:-flash_fwd_kernel}" \
        --section SourceCounters --section WarpStateStats -f -o "$OUT/$c" \
        python3 validate/probe_ncu.py "$c" >> "$OUT/ncu-source.log" 2>&1
    echo "$c profile rc=$?"
    timeout 120 "$NCU" --import "$OUT/$c.ncu-rep" --page source --csv --print-source sass \
        > "$OUT/$c-source.csv" 2>> "$OUT/ncu-source.log"
    echo "$c source rc=$? $(wc -l < "$OUT/$c-source.csv") lines"
    head -c 600 "$OUT/$c-source.csv"; echo
    gzip -f "$OUT/$c-source.csv"
    rm -f "$OUT/$c.ncu-rep"
done
