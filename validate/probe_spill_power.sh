#!/usr/bin/env bash
# Register spills, without and with attention (issue 9): the energy of a spilled byte and the
# spill bytes of FlexAttention's backward at head dims and masks not profiled before.
#   run(command="bash validate/probe_spill_power.sh", carry=[".whl"])
# 1. power_probe.py's spill benches (probe_spill_cost's MMA loop, spilling and its control)
#    beside an idle, a one-CTA spin and the L2 read walk: $OUT/power-spill.json.
# 2. Nsight Compute (probe_ncu.sh, no opcode pass) on FlexAttention's backward: $OUT/ncu/ncu.tgz.
# Knobs: CASES (probe_ncu cases), NCU_S (seconds for step 2, default 420).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/perfsim-spill-power}
mkdir -p "$OUT/ncu"
T0=$SECONDS
. validate/device_env.sh          # pydantic wheels, perfsim linked under /tmp/shim
(cd /tmp && timeout 200 python3 -m perfsim.validate.power_probe \
    --out "$OUT/power-spill.json" --duration 3 \
    --only idle,spin_1cta,l2_read,spill_m128_n128,nospill_m64_n128,spill_m64_n256,nospill_m128_n64) \
    > "$OUT/power.log" 2>&1
echo "power rc=$? t=$((SECONDS - T0)) s"; tail -12 "$OUT/power.log"
CASES=${CASES:-"flex-bwd-d160 flex-bwd-d160-c flex-bwd-d256-c flex-bwd-d192-c flex-bwd-d224"} \
    OPCODES=0 OUT="$OUT/ncu" timeout "${NCU_S:-420}" bash validate/probe_ncu.sh > "$OUT/ncu.log" 2>&1
echo "ncu rc=$? t=$((SECONDS - T0)) s"; cat "$OUT/ncu.log"
# killed by the timeout, probe_ncu.sh leaves its CSVs unpacked: pack what there is
if ls "$OUT"/ncu/ncu-* >/dev/null 2>&1; then
    (cd "$OUT/ncu" && tar czf ncu.tgz ncu-* && rm -f ncu-*)
fi
