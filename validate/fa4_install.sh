#!/usr/bin/env bash
# Installs flash-attn-4 (flash_attn.cute) into /tmp/site on the lent GPU machine, from its
# wheels and split CUDA-13 DSL tarball kept in a git-ignored .fa4/ (part-a/, part-b/ and
# install-on-device.sh; not part of the repository). A run carries at most 64 MiB together
# with the working tree, and the tree grows, so the files travel as pieces sized to what is
# left, one run each, on the same warm machine:
#   here:   bash validate/fa4_install.sh plan     (writes .fa4/s/run-NN/, prints the runs)
#   device: run NN carries ".fa4/s/run-NN" with    bash validate/fa4_install.sh stash
#           the last run carries its own piece with bash validate/fa4_install.sh install
# `install` then unpacks the pieces and runs .fa4/install-on-device.sh's own two steps;
# afterwards PYTHONPATH=/tmp/site python3 ... imports flash_attn.cute on that machine.
set -euo pipefail
cd "$(dirname "$0")/.."
STASH=/root/fa4-stash
case "${1:-}" in
  plan)
    [ -d .fa4/part-a ] && [ -d .fa4/part-b ] && [ -f .fa4/install-on-device.sh ] || {
      echo ".fa4/ needs part-a/, part-b/ and install-on-device.sh" >&2; exit 1; }
    tree=$(git ls-files -co --exclude-standard -z | du -cb --files0-from=- | tail -1 | cut -f1)
    budget=$(( 64 * 1024 * 1024 - tree - 4 * 1024 * 1024 ))
    [ "$budget" -gt $(( 8 * 1024 * 1024 )) ] || {
      echo "the working tree ($tree B) leaves under 8 MiB per run: too many runs" >&2; exit 1; }
    rm -rf .fa4/s && mkdir -p .fa4/s
    tar cf - -C .fa4 install-on-device.sh part-a part-b \
      | split -b "$budget" -d -a 2 - .fa4/s/fa4.tar.
    pieces=$(ls .fa4/s/fa4.tar.* | wc -l)
    for f in .fa4/s/fa4.tar.*; do
      n=${f##*.}; mkdir -p ".fa4/s/run-$n"; mv "$f" ".fa4/s/run-$n/"
      echo "$pieces" > ".fa4/s/run-$n/pieces"
    done
    echo "working tree $tree B; $pieces runs of at most $budget B each:"
    for d in .fa4/s/run-*; do
      last=$([ "$d" = "$(ls -d .fa4/s/run-* | tail -1)" ] && echo install || echo stash)
      echo "  carry [\"$d\"]  bash validate/fa4_install.sh $last"
    done ;;
  stash)
    mkdir -p "$STASH"
    cp .fa4/s/run-*/fa4.tar.* "$STASH"/
    cat "$(ls .fa4/s/run-*/pieces | head -1)" > "$STASH"/pieces
    echo "stashed: $(ls "$STASH"/fa4.tar.* | wc -l) of $(cat "$STASH"/pieces) pieces" ;;
  install)
    if PYTHONPATH=/tmp/site python3 -c "import flash_attn.cute" 2>/dev/null; then
      echo "flash_attn.cute already installed"; exit 0
    fi
    if [ -d .fa4/s ]; then bash "$0" stash; fi
    have=$(ls "$STASH"/fa4.tar.* 2>/dev/null | wc -l)
    want=$(cat "$STASH"/pieces 2>/dev/null || echo "?")
    [ "$have" = "$want" ] || {
      echo "$have of $want pieces in $STASH (a fresh machine, or a run left out?)" >&2; exit 1; }
    rm -rf /tmp/fa4 && mkdir -p /tmp/fa4
    cat "$STASH"/fa4.tar.* | tar xf - -C /tmp/fa4
    bash /tmp/fa4/install-on-device.sh stash && bash /tmp/fa4/install-on-device.sh install ;;
  *) echo "usage: validate/fa4_install.sh plan|stash|install" >&2; exit 2 ;;
esac
