"""The 8-bit engines' tuned cuDNN plans on disk: one JSON file per environment (GPU, cuDNN, torch)
under ``$YOLO_SM_CACHE/cudnn_plans``; ``YOLO_SM_PLAN_CACHE=off`` disables it."""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from pathlib import Path

from yolo_sm.contract.store import write_text_atomic
from yolo_sm.core.engines.config import cache_home

#: format version of the file: a change makes earlier files unread (they are left alone)
VERSION = 1


def enabled(environ=None) -> bool:
    env = os.environ if environ is None else environ
    return env.get("YOLO_SM_PLAN_CACHE", "on").strip().lower() not in ("0", "off", "false", "no")


def folder(environ=None) -> Path:
    return cache_home(environ=environ) / "cudnn_plans"


def signature_text(key: tuple) -> str:
    """A graph signature (a tuple of plain values, dtypes and devices) as stable text."""
    return json.dumps([str(v) if not isinstance(v, (int, float, bool)) else v for v in key])


class PlanCache:
    """Tuned plans of one environment ``env`` in one JSON file: ``get(key)`` -> ``(index, name)``
    or None; ``put(key, index, name, ms)`` stores and writes."""

    def __init__(self, env: dict, root: Path | None = None) -> None:
        self.env = {k: str(v) for k, v in sorted(env.items())}
        digest = hashlib.sha256(json.dumps(self.env).encode()).hexdigest()[:16]
        self.path = Path(root if root is not None else folder()) / f"plans-{digest}.json"

    def _read(self) -> dict:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            warnings.warn(
                f"tuned-plan cache {self.path} is unreadable ({e}): tuning again", stacklevel=2
            )
            return {}
        ok = isinstance(data, dict) and data.get("version") == VERSION
        ok = ok and data.get("env") == self.env and isinstance(data.get("plans"), dict)
        return data["plans"] if ok else {}

    def get(self, key: tuple) -> tuple[int, str] | None:
        entry = self._read().get(signature_text(key))
        try:
            return (int(entry["index"]), str(entry["plan"]))
        except (TypeError, KeyError, ValueError):
            return None

    def put(self, key: tuple, index: int, name: str, ms: float) -> None:
        plans = self._read()
        plans[signature_text(key)] = {"index": int(index), "plan": str(name), "ms": float(ms)}
        data = {"version": VERSION, "env": self.env, "plans": plans}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(self.path, json.dumps(data, indent=1, sort_keys=True))
        except OSError as e:  # a full or read-only disk: the tuning stands, unsaved
            warnings.warn(f"tuned-plan cache {self.path} not written ({e})", stacklevel=2)


_OPEN: dict = {}


def for_device(device) -> PlanCache | None:
    """The cache of ``device``'s environment (one per process and device), None when off."""
    if not enabled():
        return None
    import torch

    dev = torch.device(device)
    key = (str(dev), str(folder()))
    if key not in _OPEN:
        import cudnn

        env = {
            "gpu": torch.cuda.get_device_name(dev),
            "capability": ".".join(map(str, torch.cuda.get_device_capability(dev))),
            "cudnn_backend": cudnn.backend_version(),
            "cudnn_frontend": getattr(cudnn, "__version__", ""),
            "torch": torch.__version__,
        }
        _OPEN[key] = PlanCache(env)
    return _OPEN[key]
