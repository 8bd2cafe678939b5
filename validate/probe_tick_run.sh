#!/usr/bin/env bash
# The SM clock the cores tick at under sustained load against NVML's (validate/probe_tick_clock.py).
#   OUT=DIR bash validate/probe_tick_run.sh [first|cute]   (carry .whl and .ext; `first` also
#   carries .fa4/install-on-device.sh and .fa4/part-a, `cute` .fa4/part-b on the same warm machine)
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
    [ -f .fa4/install-on-device.sh ] && bash .fa4/install-on-device.sh stash 2>&1 | tail -2
    (cd /tmp && python3 -m perfsim.validate.probe_tick_clock --out "$OUT/tick-clock.json" ${CASES:+--cases $CASES} 2>&1 | grep -v Warning | tail -20) ;;
  cute)
    if [ -d .fa4/part-b ] && [ -f .fa4/part-b/cu13.part.ab ]; then
      bash .fa4/install-on-device.sh install 2>&1 | tail -2
    elif ! PYTHONPATH=/tmp/site python3 -c "import flash_attn.cute" 2>/dev/null; then
      # part B's tarball half sent ahead to /root/fa4-stash (the tree with all of part B is
      # over the 64 MiB a run carries): the install script's steps with the halves there
      cat /root/fa4-stash/cu13.part.aa /root/fa4-stash/cu13.part.ab > /tmp/cu13.tar.xz
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .fa4/part-b/*.whl
      tar xJf /tmp/cu13.tar.xz -C /tmp/site
      printf 'import site; site.addsitedir("/tmp/site")\n' > /tmp/site/sitecustomize.py
    fi
    (cd /tmp && python3 -m perfsim.validate.probe_tick_clock --out "$OUT/tick-clock-cute.json" --cases ${CASES:-idle,cute-fwd,cute-bwd,gemm} 2>&1 | grep -v Warning | tail -20) ;;
esac
