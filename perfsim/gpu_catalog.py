"""The GPU catalog (``hardware/*.toml``, installed as ``perfsim.catalog``): listing it, loading
a spec by id or from a TOML file (cached), and finding the entry of the GPU this machine has.
The model of a spec is :class:`perfsim.gpu.GPUSpec`.
"""

from __future__ import annotations

import tomllib
import warnings
from functools import lru_cache
from importlib import resources
from pathlib import Path

from perfsim.errors import PerfsimError, did_you_mean, outside_perfsim
from perfsim.gpu import GPUSpec, _validate_spec


def _catalog_dir() -> Path:
    return Path(str(resources.files("perfsim.catalog")))


def gpus() -> list[str]:
    """Catalog ids, sorted (one per ``hardware/*.toml``)."""
    return sorted(p.stem for p in _catalog_dir().glob("*.toml"))


@lru_cache(maxsize=64)
def _load_path(path: str, mtime_ns: int) -> GPUSpec:
    """Parse and validate one profile (cached per path and modification time)."""
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PerfsimError(f"{path}: not valid TOML (UTF-8): {exc}") from None
    except RecursionError:      # tomllib recurses once per level of nested arrays
        raise PerfsimError(f"{path}: not valid TOML for a GPU profile: arrays or tables "
                           "nested too deep") from None
    except OSError as exc:
        raise PerfsimError(f"GPU profile {path!r} cannot be read: "
                           f"{exc.strerror or type(exc).__name__}") from None
    return _validate_spec(data, where=path)


def load_gpu(gpu: str | Path | GPUSpec) -> GPUSpec:
    """Load a GPU by catalog id (``perfsim.gpus()``), from a TOML file path, or ``"auto"``:
    the catalog entry of the GPU this machine has (:func:`detect_gpu`).

    A calibrated profile written by ``perfsim calibrate`` is such a file.

    Returns:
        The validated ``GPUSpec`` (a ``GPUSpec`` given is returned as it is); catalog entries
        are loaded once per process.

    Raises:
        perfsim.PerfsimError: unknown id (the message lists the valid ids), unreadable file,
            a file that fails validation, ``"auto"`` where no GPU is found or the one found
            has no catalog entry (:func:`detect_gpu`), or anything but a string, a path or a
            GPUSpec (a list: one GPU per call).
    """
    if isinstance(gpu, GPUSpec):
        return gpu
    if type(gpu) is str and gpu.lower() == "auto":
        return load_gpu(detect_gpu())
    if type(gpu) is str:        # a catalog id seen before: no resource lookup, no stat
        spec = _BY_ID.get(gpu)
        if spec is not None:
            return spec
    if gpu is None:
        raise PerfsimError(f"no GPU given (gpu=None): name one of {', '.join(gpus())}, "
                           "'auto' (this machine's GPU) or a path to a .toml profile")
    if not isinstance(gpu, (str, Path)):
        several = (" (one GPU per call; perfsim.sweep(gpus=[...]) takes several)"
                   if isinstance(gpu, (list, tuple, set)) else "")
        raise PerfsimError(f"gpu must be one catalog id, 'auto', a path to a .toml profile or "
                           f"a GPUSpec, got {type(gpu).__name__} {gpu!r}{several}; valid ids: "
                           f"{', '.join(gpus())}")
    text = str(gpu)
    if not text.strip():
        raise PerfsimError(f"no GPU given (an empty name); valid ids: {', '.join(gpus())} "
                           "(or a path to a .toml profile)")
    if text.endswith(".toml") or "/" in text:
        path = Path(text)
        if _is(path, "dir"):
            raise PerfsimError(f"GPU profile {text!r} is a folder, not a .toml file")
        if not _is(path, "file"):
            raise PerfsimError(f"GPU profile file {text!r} does not exist")
        mtime = path.stat().st_mtime_ns
        spec = _load_path(str(path.resolve()), mtime)
        _warn_catalog_id(spec, str(path.resolve()), mtime)
        return spec
    text = text.strip().lower()         # catalog ids are lower case, without spaces
    path = _catalog_dir() / f"{text}.toml"
    if not _is(path, "file") and _is(Path(str(gpu)), "dir"):
        raise PerfsimError(f"GPU profile {str(gpu)!r} is a folder, not a catalog id or a "
                           f".toml file; valid ids: {', '.join(gpus())}")
    if not _is(path, "file"):
        raise PerfsimError(f"unknown GPU {text!r}{did_you_mean(text, gpus())}; valid ids: "
                           f"{', '.join(gpus())} (or a path to a .toml profile)")
    spec = _load_path(str(path), path.stat().st_mtime_ns)
    if type(gpu) is str:
        _BY_ID[gpu] = spec
    return spec


#: ``(file, modification time)`` already checked by :func:`_warn_catalog_id` (each version of
#: a file once per process).
_WARNED_IDS: set = set()


def _warn_catalog_id(spec: GPUSpec, where: str, mtime_ns: int) -> None:
    """Warn (once per version of a file) where a profile file takes a catalog GPU's id with
    other values: its results would be labelled as that catalog GPU (a fresh user's edited
    copy of ``h100-sxm5.toml`` was)."""
    if (where, mtime_ns) in _WARNED_IDS or spec.id not in gpus():
        return
    _WARNED_IDS.add((where, mtime_ns))
    if spec != load_gpu(spec.id):
        warnings.warn(f"{where}: its id {spec.id!r} is a catalog GPU's, but its values differ "
                      f"from the catalog's; its results are labelled {spec.id!r} all the same "
                      "(give the file an id of its own)", stacklevel=outside_perfsim())


def _is(path: Path, kind: str) -> bool:
    """``path.is_file()`` / ``is_dir()`` (``kind`` "file" / "dir"); False for a name the system
    refuses (too long: no file can have it)."""
    try:
        return path.is_file() if kind == "file" else path.is_dir()
    except OSError:
        return False


#: Catalog specs by the id string they were asked for (``load_gpu``'s fast path). The
#: catalog ships with the package and does not change while a process runs; profiles given
#: by path are still re-read when their modification time changes (``_load_path``).
_BY_ID: dict[str, GPUSpec] = {}


def catalog_id_for(device_name: str) -> str:
    """The catalog id whose ``device_name_pattern`` matches a device name as NVML or torch
    report it (e.g. "NVIDIA H200"): exactly one entry must match.

    Raises:
        perfsim.PerfsimError: no entry matches (a GPU the catalog lacks), or several do."""
    import re

    found = [gid for gid in gpus() if (pat := load_gpu(gid).device_name_pattern)
             and re.search(pat, device_name, re.IGNORECASE)]
    if len(found) == 1:
        return found[0]
    if found:
        raise PerfsimError(f"the GPU here ({device_name!r}) matches several catalog entries "
                           f"({', '.join(found)}); give --gpu one of them")
    raise PerfsimError(f"the GPU here ({device_name!r}) has no catalog entry; give --gpu one "
                       f"of {', '.join(gpus())} or a .toml profile")


def detect_gpu() -> str:
    """The catalog id of this machine's first GPU, by NVML (nvidia-ml-py) or else torch; it
    says which it found on stderr.

    Raises:
        perfsim.PerfsimError: no NVIDIA GPU found, or one the catalog lacks."""
    import sys

    name = None
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            raw = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
            name = raw.decode() if isinstance(raw, bytes) else str(raw)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no NVML, no driver, no GPU: try torch
        try:
            import torch

            if torch.cuda.is_available():
                name = torch.cuda.get_device_name(0)
        except Exception:  # noqa: BLE001 - no torch or no CUDA
            name = None
    if not name:
        raise PerfsimError("gpu 'auto': no NVIDIA GPU found (NVML, torch); give a catalog id "
                           f"({', '.join(gpus())}) or a .toml profile")
    gid = catalog_id_for(name)
    sys.stderr.write(f"perfsim: gpu auto: {name} -> {gid}\n")
    return gid

