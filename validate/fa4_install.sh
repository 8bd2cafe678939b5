#!/usr/bin/env bash
# Installs flash-attn-4 (flash_attn.cute) into /tmp/site on the lent GPU machine, from its
# wheels and split CUDA-13 DSL tarball kept in a git-ignored .fa4/ (part-a/, part-b/ and
# install-on-device.sh; not part of the repository). A run carries at most
# 64 MiB with the working tree, so the files travel in three runs on the same warm machine:
#   1. carry .fa4/install-on-device.sh and .fa4/part-a:  bash validate/fa4_install.sh stash-a
#   2. carry .fa4/part-b/cu13.part.ab:                   bash validate/fa4_install.sh stash-b
#   3. carry the eight .fa4/part-b/*.whl:                bash validate/fa4_install.sh install
# (with a smaller tree, .fa4/install-on-device.sh's own `stash` then `install` with all of
# part-b carried does the same: `install` here takes that path when part-b is complete).
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  stash-a) bash .fa4/install-on-device.sh stash ;;
  stash-b) mkdir -p /root/fa4-stash && cp .fa4/part-b/cu13.part.ab /root/fa4-stash/ \
             && echo "part B's tarball half stashed" ;;
  install)
    if PYTHONPATH=/tmp/site python3 -c "import flash_attn.cute" 2>/dev/null; then
      echo "flash_attn.cute already installed"; exit 0
    fi
    if [ -f .fa4/part-b/cu13.part.ab ] && [ -f .fa4/install-on-device.sh ]; then
      bash .fa4/install-on-device.sh install; exit 0
    fi
    for half in aa ab; do
      [ -f /root/fa4-stash/cu13.part.$half ] || { echo "/root/fa4-stash/cu13.part.$half missing (a fresh machine?): stash-a and stash-b first" >&2; exit 1; }
    done
    cat /root/fa4-stash/cu13.part.aa /root/fa4-stash/cu13.part.ab > /tmp/cu13.tar.xz
    mkdir -p /tmp/site
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .fa4/part-b/*.whl
    tar xJf /tmp/cu13.tar.xz -C /tmp/site
    # pip --target does not run .pth files; the DSL finds its packages through one
    printf 'import site; site.addsitedir("/tmp/site")\n' > /tmp/site/sitecustomize.py
    PYTHONPATH=/tmp/site python3 -c "import flash_attn.cute, cutlass; print('flash_attn.cute ready')" ;;
  *) echo "usage: validate/fa4_install.sh stash-a|stash-b|install" >&2; exit 2 ;;
esac
