#!/usr/bin/env bash
# Decode / sliding-window / varlen / paged-KV attention rows (validate/external_decode.py) on the
# lent H200, from the repo root, through the device tool's `run`. MODE (first argument):
#   rows     rows only (flash-attn-4 already installed in /tmp/site on this warm machine;
#            without it the cute rows are left out of the run, not failed)
#   install  install flash-attn-4 from part B first (.fa4/install-on-device.sh and .fa4/part-b
#            carried; part A stashed earlier on the same machine with
#            `bash .fa4/install-on-device.sh stash`), then rows
# Always carried: .whl (pydantic wheels). Knobs: LIMIT (seconds for the rows, default 330),
# KINDS (default: decode window varlen paged), GRID (main, the default; holdout, mask-holdout,
# paged-holdout or gqa-holdout: hold-out grids; holdout: the
# hold-out shapes of --grid holdout). Outputs under $OUT: run.log, decode/results.jsonl
# (GRID=holdout: decode-holdout/results.jsonl). Rows resume from /tmp/decode-results (a warm
# machine) or else from the repo copy validate/reports/h200-decode/results.jsonl; GRID=holdout:
# /tmp/decode-holdout-results, else validate/reports/h200-decode-holdout/results.jsonl.
set -uo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-rows}
OUT=${OUT:-/tmp/perfsim-out}
LIMIT=${LIMIT:-330}
KINDS=${KINDS:-}
GRID=${GRID:-main}
case "$GRID" in
    main) NAME=decode ;;
    holdout) NAME=decode-holdout ;;
    mask-holdout) NAME=decode-mask-holdout ;;
    paged-holdout) NAME=decode-paged-holdout ;;
    gqa-holdout) NAME=decode-gqa-holdout ;;
    *) echo "GRID must be main, holdout, mask-holdout, paged-holdout or gqa-holdout, not '$GRID'" >&2
       exit 2 ;;
esac
LOG=$OUT/run.log
mkdir -p "$OUT/$NAME"
export PYTHONUNBUFFERED=1
T0=$SECONDS
step() { echo "== $* (t=$((SECONDS - T0)) s)" | tee -a "$LOG"; }

step "wheels ($MODE)"
if ! PYTHONPATH=/tmp/site python3 -c "import pydantic" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl >>"$LOG" 2>&1 || { tail -5 "$LOG"; exit 1; }
    if ! python3 -c "from importlib.metadata import version as v; import sys; \
sys.exit(tuple(map(int, v('typing_extensions').split('.')[:3])) < (4, 14, 1))" 2>/dev/null; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/site .whl/optional/typing_extensions-*.whl >>"$LOG" 2>&1
    fi
fi
if [ "$MODE" = install ]; then
    step "install flash-attn-4"
    bash .fa4/install-on-device.sh install 2>&1 | tail -3 | tee -a "$LOG"
fi
# perfsim as a linked package tree (the layout of pyproject.toml: validate/, hardware/)
rm -rf /tmp/shim && mkdir -p /tmp/shim && cp -r perfsim /tmp/shim/perfsim
ln -s "$PWD/validate" /tmp/shim/perfsim/validate
ln -s "$PWD/hardware" /tmp/shim/perfsim/catalog
export PYTHONPATH=/tmp/shim:/tmp/site
# run python outside the repo root, where ./perfsim would shadow the linked tree
py() { (cd /tmp && python3 "$@"); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit \
    --format=csv,noheader 2>&1 | tee -a "$LOG"

REPO_RES=validate/reports/h200-$NAME
RES=/tmp/$NAME-results
mkdir -p "$RES"
if [ ! -f "$RES/results.jsonl" ] && [ -f "$REPO_RES/results.jsonl" ]; then
    cp "$REPO_RES/results.jsonl" "$RES/results.jsonl"
fi
END=$((SECONDS + ${LIMIT%.*}))
for attempt in 1 2 3 4; do
    LEFT=$((END - SECONDS))
    [ "$LEFT" -gt 10 ] || break
    step "decode rows ($GRID grid): attempt $attempt, limit $LEFT s"
    # shellcheck disable=SC2086
    py -m perfsim.validate.external_decode --out "$RES" --limit-seconds "$LEFT" \
        --grid "$GRID" ${KINDS:+--kinds $KINDS} 2>&1 | tee -a "$LOG" | tail -60
    RC=${PIPESTATUS[0]}
    cp "$RES/results.jsonl" "$OUT/$NAME/results.jsonl" 2>/dev/null
    [ "$RC" -eq 3 ] || break
done
cp "$RES/results.jsonl" "$OUT/$NAME/results.jsonl" 2>/dev/null
step "done"
