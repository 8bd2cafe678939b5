#!/usr/bin/env bash
# The locked-dQ microbenchmark (probe_dq_lock.py) timed, then its full protocol (mode 2) under
# Nsight Compute for the executed instructions per opcode (lock tries: ATOM, NANOSLEEP), on
# the lent GPU:
#   run(command="bash validate/probe_dq_lock.sh")
# Writes $OUT/probe_dq_lock.json and $OUT/ncu-dq-lock-CONFIG.csv.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/perfsim-dq-lock}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv
timeout 300 python3 validate/probe_dq_lock.py "$OUT/probe_dq_lock.json"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
for spec in "tile128x128_w16 230" "tile64x64_w4 110"; do
    set -- $spec
    timeout 120 "$NCU" --clock-control none --kernel-name regex:dq_lock_walk --launch-skip 1 \
        --launch-count 1 --metrics sass__inst_executed_per_opcode,gpu__time_duration.sum,sm__cycles_elapsed.avg,sm__warps_active.avg.pct_of_peak_sustained_active,launch__occupancy_limit_registers,launch__registers_per_thread \
        --print-metric-instances details --csv --page raw \
        python3 validate/probe_dq_lock.py --one "$1" "$2" 2 > "$OUT/ncu-dq-lock-$1.csv" 2> "$OUT/ncu-$1.err"
    echo "$1 ncu rc=$? $(wc -l < "$OUT/ncu-dq-lock-$1.csv") lines"; tail -2 "$OUT/ncu-$1.err"
done
