#!/usr/bin/env bash
# The SM clock the cores tick at under sustained load against NVML's (validate/probe_tick_clock.py).
#   OUT=DIR bash validate/probe_tick_run.sh [first|cute]   (carry .whl and .ext; `cute` after
#   flash-attn-4 is stashed on the same warm machine: validate/fa4_install.sh says how)
set -uo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-first}
if ! PYTHONPATH=/tmp/site python3 -c "import pydantic" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
fi
rm -rf /tmp/shim && mkdir -p /tmp/shim && cp -r perfsim /tmp/shim/perfsim
ln -s "$PWD/validate" /tmp/shim/perfsim/validate
ln -s "$PWD/hardware" /tmp/shim/perfsim/catalog
export PYTHONPATH=/tmp/shim:/tmp/site PYTHONUNBUFFERED=1
case "$MODE" in
  first)
    (cd /tmp && python3 -m perfsim.validate.probe_tick_clock --out "$OUT/tick-clock.json" ${CASES:+--cases $CASES} 2>&1 | grep -v Warning | tail -20) ;;
  cute)
    bash validate/fa4_install.sh install 2>&1 | tail -2
    (cd /tmp && python3 -m perfsim.validate.probe_tick_clock --out "$OUT/tick-clock-cute.json" --cases ${CASES:-idle,cute-fwd,cute-bwd,gemm} 2>&1 | grep -v Warning | tail -20) ;;
esac
