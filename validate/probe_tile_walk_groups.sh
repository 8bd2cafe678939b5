#!/usr/bin/env bash
# L2 bytes of the TMA tile walk against how many programs read the same tiles in step (1-132),
# under Nsight Compute (validate/README.md, "Energy per byte of TMA and cp.async tile loads"):
#   OUT=DIR [BENCHES=...] [NAME=...] bash validate/probe_tile_walk_groups.sh  (carry .whl)
set -u
cd "$(dirname "$0")/.."
. validate/device_env.sh
# BENCHES: power_probe tile walks to profile (default: the grouped walks; the pairs are
# walk_tma_l2_pair{1,2,8,33,66,132}, walk_tma_l2_pair1_lag{1,2,8}, walk_ptr_l2_pair1[_lag1])
BENCHES=${BENCHES:-"walk_tma_l2 walk_tma_l2_g2 walk_tma_l2_g4 walk_tma_l2_g8 walk_tma_l2_g16 walk_tma_l2_g32 walk_tma_l2_g132 walk_ptr_l2 walk_ptr_l2_g8"}
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
(cd /tmp && nvidia-smi --query-gpu=clocks.sm --format=csv,noheader && timeout 300 $NCU --clock-control none --profile-from-start off \
  --metrics lts__t_bytes.sum,lts__t_sectors_srcunit_tex.sum,dram__bytes.sum,gpu__time_duration.sum \
  --csv --page raw python3 -m perfsim.validate.probe_tile_walk_ncu $BENCHES \
  > "$OUT/${NAME:-ncu-tile-walk-groups}.csv" 2> "$OUT/${NAME:-ncu-tile-walk-groups}.err")
echo "ncu rc=$?"
