#!/usr/bin/env bash
# Steady power of an L2 read walk and of WGMMA loops with shared-memory operands, and the L2
# and HBM bytes per FLOP of cuBLAS GEMMs under Nsight Compute (not attention): the inputs of
# PowerSpec.l2_pj_per_byte and of the WGMMA energy without its operand traffic.
#   OUT=DIR bash validate/probe_energy_run.sh     (carry .whl for pydantic)
#   OUT=DIR ONLY=idle,spin_1cta,fp32_fma,l2_read,l2_reduce,l2_bulk_reduce NAME=power-l2-reduce \
#       NCU_GEMMS=0 bash validate/probe_energy_run.sh
#     the steady power of fp32 reductions into L2 (validate/README.md, "Energy of fp32
#     reductions into L2"): a chosen set of power_probe benchmarks, no Nsight Compute
set -uo pipefail
cd "$(dirname "$0")/.."
. validate/device_env.sh
ONLY=${ONLY:-idle,spin_1cta,l2_read,wgmma_smem_1cta,wgmma_smem_2cta,gemm_bf16_half_duty}
(cd /tmp && python3 -m perfsim.validate.power_probe --out "$OUT/${NAME:-power-l2-wgmma}.json" --duration 3 --only "$ONLY" 2>&1 | tail -12)
[ "${NCU_GEMMS:-1}" = 0 ] && exit 0
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
for n in 4096 8192; do
  timeout 200 $NCU --clock-control none --profile-from-start off --metrics lts__t_bytes.sum,dram__bytes.sum,gpu__time_duration.sum,sm__cycles_elapsed.avg,lts__t_sectors_srcunit_tex.sum,lts__t_bytes_srcunit_tex.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active --csv --page raw python3 validate/probe_gemm_l2.py $n > $OUT/ncu-gemm-$n.csv 2> $OUT/ncu-gemm-$n.err
  echo "ncu $n rc=$?"
done
