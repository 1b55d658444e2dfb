"""Ultralytics checkpoints: read with torch's restricted unpickler (only torch/ultralytics
``nn.Module`` classes and plain values allowed, so loading runs no code), and write one that
``ultralytics.YOLO`` loads too. The held module (``ema`` else ``model``) returns fused, fp32, eval.
"""

from __future__ import annotations

import copy
import datetime
import importlib
import pickle
import zipfile
from pathlib import Path

from yolo_sm.contract.errors import UserError
from yolo_sm.contract.store import atomic_file
from yolo_sm.core.models.common import UserModel, first_line, frozen
from yolo_sm.core.models.yolo import wrap_detection
from yolo_sm.core.offline import prepare_ultralytics

#: plain value types an ultralytics checkpoint stores besides modules and tensors
_VALUE_TYPES = {
    "ultralytics.utils.IterableSimpleNamespace",
    "types.SimpleNamespace",
    "pathlib.PosixPath",
    "pathlib.WindowsPath",
    "collections.OrderedDict",
    "numpy.dtype",
    "numpy.core.multiarray.scalar",
    "numpy._core.multiarray.scalar",
    "numpy.core.multiarray._reconstruct",
    "numpy._core.multiarray._reconstruct",
    "numpy.ndarray",
}
_MODULE_ROOTS = ("torch.nn.modules.", "ultralytics.nn.")


def _allowed(name: str):
    """The object a checkpoint global names, when it may be created on load; else None."""
    from torch import nn

    module, _, attr = name.rpartition(".")
    if not module:
        return None
    is_value = name in _VALUE_TYPES or (module == "numpy.dtypes" and attr.endswith("DType"))
    if not is_value and not (module + ".").startswith(_MODULE_ROOTS):
        return None
    try:
        obj = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):
        return None
    if is_value or (isinstance(obj, type) and issubclass(obj, nn.Module)):
        return obj
    return None


#: most bytes a checkpoint's archive may unpack to (the largest YOLO checkpoints hold ~0.3 GB)
MAX_CHECKPOINT_BYTES = 4 << 30


def read_checkpoint(path: str | Path) -> dict:
    """The checkpoint dict at ``path`` on the CPU; UserError if missing, not a torch zip,
    truncated, larger than :data:`MAX_CHECKPOINT_BYTES` unpacked, or needing other globals."""
    import torch

    p = Path(path)
    if not p.is_file():
        raise UserError(f"checkpoint {path} does not exist")
    if not zipfile.is_zipfile(p):
        raise UserError(
            f"{path} is not a PyTorch checkpoint (not a torch.save zip archive, or truncated)"
        )
    try:
        with zipfile.ZipFile(p) as z:
            inflated = sum(i.file_size for i in z.infolist())
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        raise UserError(f"checkpoint {path} is corrupt or truncated ({type(e).__name__})") from None
    if inflated > MAX_CHECKPOINT_BYTES:
        raise UserError(
            f"checkpoint {path} unpacks to {inflated / 2**30:.1f} GiB, more than "
            f"{MAX_CHECKPOINT_BYTES >> 30} GiB: not a detector checkpoint"
        )
    prepare_ultralytics()
    try:
        needed = torch.serialization.get_unsafe_globals_in_checkpoint(str(p))
    except Exception as e:  # noqa: BLE001 - a damaged archive
        raise UserError(f"checkpoint {path} is corrupt or truncated ({type(e).__name__})") from None
    allowed = {name: _allowed(name) for name in needed}
    refused = sorted(name for name, obj in allowed.items() if obj is None)
    if refused:
        raise UserError(
            f"checkpoint {path} needs Python objects beyond torch and ultralytics modules "
            f"({', '.join(refused[:4])}); it is not loaded"
        )
    try:
        with torch.serialization.safe_globals([(obj, name) for name, obj in allowed.items()]):
            ckpt = torch.load(str(p), map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile, KeyError) as e:
        first = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        raise UserError(f"checkpoint {path} is corrupt or truncated ({first})") from None
    if not isinstance(ckpt, dict):
        raise UserError(f"{path} holds a {type(ckpt).__name__}, not an ultralytics checkpoint dict")
    return ckpt


def checkpoint_module(ckpt: dict, path: str | Path = "checkpoint"):
    """The module of an ultralytics checkpoint dict: ``ema`` when present, else ``model``."""
    from torch import nn

    model = ckpt.get("ema") or ckpt.get("model")
    if not isinstance(model, nn.Module):
        raise UserError(
            f"{path} holds no model: an ultralytics checkpoint has an nn.Module under 'model' "
            "or 'ema'"
        )
    return model


def load_checkpoint(path: str | Path, fuse: bool = True):
    """The trained model at ``path``, fp32, fused, eval, no grad: a detector as ``YoloForward``,
    another module as ``UserModel``."""
    model = checkpoint_module(read_checkpoint(path), path).float().eval()
    if hasattr(model, "model") and hasattr(model, "fuse") and hasattr(model, "yaml"):
        try:
            return wrap_detection(model, fuse=fuse)
        except Exception as e:  # noqa: BLE001 - a model ultralytics cannot run
            msg = f"checkpoint {path} holds a model that does not run ({first_line(e, 200)})"
            raise UserError(msg) from None
    return UserModel(frozen(model)).eval()


def write_checkpoint(det, out: str | Path, source: dict) -> Path:
    """Write ``det`` (an ultralytics DetectionModel) as an ultralytics checkpoint at ``out``
    (unfused, fp16, ``source`` under ``yolo_sm``), atomically; returns the path."""
    import torch
    import ultralytics

    out = Path(out)
    ckpt = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(),
        "version": ultralytics.__version__,
        "epoch": -1,
        "best_fitness": None,
        "model": copy.deepcopy(det).half(),
        "ema": None,
        "updates": None,
        "optimizer": None,
        "train_args": {"task": "detect", "imgsz": 640, "model": str(source.get("spec", ""))},
        "train_metrics": None,
        "train_results": None,
        "yolo_sm": dict(source),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(out, "wb") as fh:  # a unique, exclusively created temp: no link followed
        torch.save(ckpt, fh)
    return out
