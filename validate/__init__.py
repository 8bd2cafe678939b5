"""Validation against real GPUs: Triton kernels, microbenchmarks and the measurement runner.

``perfsim.validate.kernels`` holds one Triton (or eager-torch) kernel module per algorithm,
written to match the model's tiling, loop order and HBM traffic (DESIGN.md, "Validation"). This
package imports neither torch nor triton at module level, so ``import perfsim.validate`` works
on machines without them; the kernel modules import them when loaded.
"""

from pathlib import Path

#: Committed results of ``perfsim validate`` runs, one folder per GPU (``h200/``).
REPORTS_DIR = Path(__file__).parent / "reports"
#: Calibrated GPU profiles written by ``perfsim calibrate``.
PROFILES_DIR = Path(__file__).parent / "profiles"
