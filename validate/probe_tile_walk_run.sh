#!/usr/bin/env bash
# Steady power of the tile walks, grouped and not, and their L2 bytes under Nsight Compute
# (validate/README.md, "Energy per byte of TMA and cp.async tile loads"):
#   OUT=DIR bash validate/probe_tile_walk_run.sh     (carry .whl for pydantic)
set -u
OUT=$OUT NCU_GEMMS=0 NAME=power-tile-walk-group ONLY=idle,spin_1cta,walk_none_l2,walk_tma_l2,walk_tma_l2_g8,walk_ptr_l2,walk_ptr_l2_g8,walk_tma_hbm,walk_tma_hbm_g8 bash validate/probe_energy_run.sh 2>&1 | tail -14
export PYTHONPATH=/tmp/shim:/tmp/site   # probe_energy_run.sh built the shim
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
cd /tmp && timeout 240 $NCU --clock-control none --profile-from-start off --metrics lts__t_bytes.sum,lts__t_sectors_srcunit_tex.sum,lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes.sum,gpu__time_duration.sum --csv --page raw python3 -m perfsim.validate.probe_tile_walk_ncu walk_tma_l2 walk_tma_l2_g8 walk_ptr_l2 walk_ptr_l2_g8 walk_tma_hbm walk_tma_hbm_g8 > $OUT/ncu-tile-walk.csv 2> $OUT/ncu-tile-walk.err
echo "ncu rc=$?"; tail -3 $OUT/ncu-tile-walk.err; wc -l $OUT/ncu-tile-walk.csv
