"""Where flash-attn 2's forward keeps its code: the main loop and what runs before it, from the
kernels' SASS (issue 9's instruction-fetch lead; validate/README.md, "The causal mask as
flash-attn 2 executes it").

No GPU is needed. The SASS comes from the same build the device runs (torch 2.11.0+cu130) and
NVIDIA's disassemblers, all from pip wheels::

    pip download --no-deps -d W torch==2.11.0 nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm
    unzip W/torch-*.whl 'torch/lib/libtorch_cuda.so'; unzip W/nvidia_cuda_*.whl
    export PATH=$PWD/nvidia/cu13/bin:$PATH     # cuobjdump calls nvdisasm
    cuobjdump -xelf libtorch_cuda.154.sm_90.cubin torch/lib/libtorch_cuda.so
    cuobjdump -sass libtorch_cuda.154.sm_90.cubin > k154.sass
    python -m perfsim.validate.sass_loops k154.sass [more.sass ...]

(the cubins holding the bf16 ``flash_fwd_kernel`` variants at head dims 64, 128 and 256 are
named in ``reports/h100/probes/sass/flash_fwd_text.txt``: 196/202, 148/154 and 244/250).

For each bf16 ``flash_fwd_kernel`` it prints the tile (``Flash_fwd_kernel_traits``: head dim,
B_r, B_c, warps), the kernel's bool template arguments as a string (PyTorch's order:
dropout, causal, local, ALiBi, even M/N, even K, softcap, return softmax), its code size, and
every loop of at least 1 kB — a backward branch, its target and the bytes between. The
largest is the main (unmasked) loop over key tiles; the code before it is the prologue and
the unrolled masked iterations (``n_masking_steps`` copies of the loop body).
"""

from __future__ import annotations

import re
import sys

#: Loops shorter than this (bytes) are inner loops of the body, not listed.
MIN_LOOP_BYTES = 1024
#: One SASS instruction, bytes (sm_70 and later).
INSTRUCTION_BYTES = 16


def functions(text: str):
    """``(mangled name, [(address, instruction), ...])`` for each function of a dump."""
    for chunk in text.split("Function : ")[1:]:
        name = chunk.split("\n", 1)[0].strip()
        code = [(int(m.group(1), 16), m.group(2).strip())
                for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+(.*?);", chunk)]
        yield name, code


def loops(code) -> list[tuple[int, int, int]]:
    """``(target, branch address, bytes)`` of every backward branch of at least
    :data:`MIN_LOOP_BYTES`."""
    found = []
    for addr, text in code:
        m = re.match(r"(?:@!?U?P\w+\s+)?BRA\S*\s+0x([0-9a-f]+)", text.strip())
        if m and int(m.group(1), 16) < addr:
            size = addr + INSTRUCTION_BYTES - int(m.group(1), 16)
            if size >= MIN_LOOP_BYTES:
                found.append((int(m.group(1), 16), addr, size))
    return found


def main_loop(code) -> tuple[int, int, int] | None:
    """The longest of :func:`loops` (a flash-attn forward's main loop over key tiles), else
    None."""
    found = loops(code)
    return max(found, key=lambda loop: loop[2]) if found else None


def describe(name: str):
    """``((head dim, B_r, B_c, warps), bools)`` of a ``flash_fwd_kernel`` name, else None."""
    if "flash_fwd_kernel" not in name or "splitkv" in name:
        return None
    m = re.search(r"traitsILi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)", name)
    if not m:
        return None
    return tuple(int(g) for g in m.groups()), "".join(re.findall(r"Lb([01])",
                                                                  name.split("S3_EE")[-1]))


def rows(text: str) -> list[dict]:
    """One dict per bf16 forward kernel of a dump: tile, bools, bytes, main loop, before it."""
    out = []
    for name, code in functions(text):
        got = describe(name)
        if got is None or "bfloat16" not in name or not code:
            continue
        (d, b_r, b_c, warps), bools = got
        found = loops(code)
        main = main_loop(code)
        out.append({"head_dim": d, "block_m": b_r, "block_n": b_c, "warps": warps,
                    "bools": bools, "causal": bools[1] == "1", "local": bools[2] == "1",
                    "even_mn": bools[4] == "1",
                    "bytes": code[-1][0] + INSTRUCTION_BYTES,
                    "main_loop_bytes": main[2] if main else None,
                    "before_main_loop_bytes": main[0] if main else None,
                    "loops": found})
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print("usage: python -m perfsim.validate.sass_loops DUMP.sass [...]", file=sys.stderr)
        return 2
    for path in argv:
        try:
            text = open(path, encoding="utf-8", errors="replace").read()
        except OSError as exc:
            print(f"sass_loops: {exc}", file=sys.stderr)
            return 1
        for r in rows(text):
            print(f"d {r['head_dim']:3d} {r['block_m']}x{r['block_n']} {r['warps']} warps "
                  f"{r['bools']}  {r['bytes']:7d} B  main loop {r['main_loop_bytes']} B, "
                  f"before it {r['before_main_loop_bytes']} B")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
