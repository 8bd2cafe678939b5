#!/usr/bin/env bash
# The spill microbenchmark (probe_spill_cost.py) timed, then under Nsight Compute for its
# local-memory bytes, on the lent H200:
#   run(command="bash validate/probe_spill_cost.sh")
# Writes $OUT/probe_spill_cost.json (times, registers, spills) and $OUT/probe_spill_cost-ncu.csv.
# PROBE_SET=sweep runs probe_spill_cost.VARIANTS_SWEEP instead (stages and wider spills; then
# NAME=probe_spill_cost-sweep names the files and LAUNCHES=24 covers its 12 variants' launches).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/perfsim-spill-cost}
mkdir -p "$OUT"
NAME=${NAME:-probe_spill_cost}
python3 validate/probe_spill_cost.py "$OUT/$NAME.json"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
PROBE_REPS=1 "$NCU" --clock-control none --kernel-name regex:two_acc_loop --metrics \
gpu__time_duration.sum,sm__cycles_elapsed.avg,l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum,launch__registers_per_thread,launch__grid_size,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum,smsp__inst_executed_op_local_ld.sum \
    --launch-count "${LAUNCHES:-16}" --csv --page raw python3 validate/probe_spill_cost.py > "$OUT/$NAME-ncu.csv" 2> "$OUT/ncu.err"
echo "ncu rc=$? $(wc -l < "$OUT/$NAME-ncu.csv") lines"; tail -3 "$OUT/ncu.err"
python3 validate/probe_spill_cost.py --merge "$OUT/$NAME.json" "$OUT/$NAME-ncu.csv"
