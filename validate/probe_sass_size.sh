#!/usr/bin/env bash
# Code size of PyTorch's flash-attn 2 forward kernels (issue 9's instruction-fetch lead): the
# .text section of each flash_fwd kernel in libtorch_cuda's cubins, by cuobjdump, on a CUDA
# machine (no GPU work):  OUT=DIR bash validate/probe_sass_size.sh
# Writes DIR/sass_size.txt (the log), DIR/elf_list.txt (every cubin) and DIR/flash_fwd_text.txt
# (each sm_90 flash_fwd kernel: cubin, .text size in bytes, mangled name).
set -u
OUT=${OUT:-/tmp/perfsim-sass}
mkdir -p "$OUT"
CUOBJDUMP=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | tail -1)
LIB=$(python3 -c "import torch, os; print(os.path.join(os.path.dirname(torch.__file__), 'lib', 'libtorch_cuda.so'))")
{
echo "cuobjdump: $CUOBJDUMP"; "$CUOBJDUMP" --version | tail -1; echo "lib: $LIB"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
cd "$OUT" || exit 1
"$CUOBJDUMP" -lelf "$LIB" > elf_list.txt 2>&1
echo "cubins: $(wc -l < elf_list.txt)"
# every cubin out (the list names them by number and architecture, not by source), then the
# sm_90 ones' sections: a kernel's code is its .text.<mangled name> section
mkdir -p cubins && cd cubins || exit 1
timeout 300 "$CUOBJDUMP" -xelf all "$LIB" > /dev/null 2>&1
echo "extracted: $(ls | wc -l) files"
python3 - > ../flash_fwd_text.txt <<'PY'
import glob, re, subprocess
rows = []
for f in sorted(glob.glob("*sm_90*.cubin")):
    text = subprocess.run(["readelf", "-SW", f], capture_output=True, text=True).stdout
    for m in re.finditer(r"\]\s+(\S+)\s+\S+\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)", text):
        if m.group(1).startswith(".text.") and "flash_fwd" in m.group(1):
            rows.append((int(m.group(2), 16), f, m.group(1)))
for size, f, name in sorted(rows):
    print(f, size, name)
PY
cd .. && rm -rf cubins
echo "flash_fwd kernels (sm_90 cubin, section, bytes): $(wc -l < flash_fwd_text.txt)"
cat flash_fwd_text.txt | cut -c1-400
} > "$OUT/sass_size.txt" 2>&1
tail -60 "$OUT/sass_size.txt"
