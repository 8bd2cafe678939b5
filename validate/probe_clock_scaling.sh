#!/usr/bin/env bash
# How a kernel's cycles per call move with the SM clock (not an attention timing: a profile of
# the same launch at two clocks). Nsight Compute runs each case twice: `--clock-control none`
# (the kernel alone, at the clock the GPU picks with no power limit reached) and
# `--clock-control base` (Nsight Compute locks the SMs at the base clock for the kernel and
# restores them after). A kernel whose time is set by SM-side work keeps its cycles per call at
# both clocks; one that waits on something timed in nanoseconds (HBM or L2 latency, a load
# chain) takes fewer cycles at the lower clock. Then the tick probe (probe_tick_clock.py)
# beside the same shapes under sustained load: the clock the SMs tick at over NVML's.
#   OUT=DIR [CASES="..."] [TICK="..."] bash validate/probe_clock_scaling.sh
# Writes DIR/clk-CASE-{none,base}.csv (Nsight Compute's raw page, one row per kernel),
# DIR/tick.json. Cases: probe_ncu.py's (attention), chain-COLS (probe_chain_target.py: the
# load chain from HBM) and chainl2-COLS (its L2-resident walk).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/perfsim-clock}
mkdir -p "$OUT"
. validate/ncu_env.sh
METRICS="gpu__time_duration.sum,sm__cycles_elapsed.avg,sm__cycles_elapsed.avg.per_second,\
sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,\
sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,\
sm__pipe_xu_cycles_active.avg.pct_of_peak_sustained_active,dram__bytes.sum,lts__t_bytes.sum"
CASES=${CASES:-"chain-32 chain-256 cudnn-fwd-d256-n16384-b1-h8 cudnn-fwd-d256 cudnn-fwd-d64-n16384-b1-h32 \
cudnn-fwd-d128-n16384-b1-h16 flash-fwd-d128-n16384-b1-h16"}
for c in $CASES; do
    for cc in none base; do
        case "$c" in
            chainl2-*) target=(validate/probe_chain_target.py "${c#chainl2-}" 8) ;;
            chain-*) target=(validate/probe_chain_target.py "${c#chain-}") ;;
            *) target=(validate/probe_ncu.py "$c") ;;
        esac
        (cd /tmp && timeout 120 "$NCU" --clock-control "$cc" --profile-from-start off \
            --metrics "$METRICS" --csv --page raw python3 "$OLDPWD/${target[0]}" \
            "${target[@]:1}") > "$OUT/clk-$c-$cc.csv" 2> "$OUT/clk-$c-$cc.err"
        echo "$c $cc rc=$? $(wc -l < "$OUT/clk-$c-$cc.csv") lines"
    done
done
TICK=${TICK:-"idle,sdpa_cudnn-fwd@1x8x16384x256,sdpa_cudnn-fwd@1x32x16384x64,\
sdpa_cudnn-fwd@1x16x16384x128"}
[ "$TICK" = none ] && exit 0         # TICK=none: the Nsight Compute cases alone
(cd /tmp && timeout 200 python3 -m perfsim.validate.probe_tick_clock --out "$OUT/tick.json" \
    --cases "$TICK") 2>&1 | tail -12
