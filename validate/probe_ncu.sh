#!/usr/bin/env bash
# Nsight Compute counters of the attention kernels users call (issue 9's mma.sync question):
#   OUT=DIR [CASES="..."] [OPCODES=0] [EXTRA_METRICS=a,b] bash validate/probe_ncu.sh
# Needs ncu with access to the hardware counters (cute: flash-attn-4 installed in /tmp/site;
# tutorial: .ext/ carried). Writes DIR/ncu-CASE.csv (raw page, one
# row per kernel) and DIR/ncu-CASE-opcodes.csv (executed SASS instructions per opcode), packed
# into DIR/ncu.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/perfsim-ncu}
mkdir -p "$OUT"
. validate/ncu_env.sh
SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats \
  --section WarpStateStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis"
METRICS="smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor_op_hmma.sum,sm__inst_executed_pipe_xu.sum,sm__inst_executed_pipe_fma.sum,sm__inst_executed_pipe_alu.sum,sm__inst_executed_pipe_lsu.sum,sm__inst_executed_pipe_fp16.sum,sm__inst_executed_pipe_uniform.sum,sm__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,sm__cycles_elapsed.avg,sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_active.min,dram__bytes.sum,gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_xu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor_op_gmma.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum,lts__t_bytes.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_gmma.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"
# EXTRA_METRICS: more counters, comma-separated (e.g. the L2's reduction sectors,
# lts__t_sectors_op_red.sum)
METRICS="$METRICS${EXTRA_METRICS:+,$EXTRA_METRICS}"
for c in ${CASES:-$(python3 validate/probe_ncu.py --list)}; do
    timeout 240 "$NCU" --clock-control none --profile-from-start off $SECTIONS --metrics "$METRICS" \
        --csv --page raw python3 validate/probe_ncu.py "$c" > "$OUT/ncu-$c.csv" 2> "$OUT/ncu-$c.err"
    echo "$c rc=$? $(wc -l < "$OUT/ncu-$c.csv") lines"
    [ "${OPCODES:-1}" = 0 ] && continue      # OPCODES=0: no per-opcode census pass
    timeout 240 "$NCU" --clock-control none --profile-from-start off \
        --metrics sass__inst_executed_per_opcode --print-metric-instances details \
        --csv --page raw python3 validate/probe_ncu.py "$c" > "$OUT/ncu-$c-opcodes.csv" 2>> "$OUT/ncu-$c.err"
    echo "$c opcodes rc=$?"
done
for f in "$OUT"/*.err; do tail -n 3 "$f" | cut -c1-300; done
(cd "$OUT" && tar czf ncu.tgz ncu-* && rm -f ncu-*)
