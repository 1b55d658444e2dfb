"""What a workload runs now, in a JSON status file (:data:`STATUS_ENV`) that ``yolo-sm monitor``
reads to label samples: ``{"pid", "t_unix", "labels": {...}}``."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from yolo_sm.contract.store import process_alive, write_text_atomic

#: the environment variable naming the status file
STATUS_ENV = "YOLO_SM_STATUS_FILE"
#: the labels a workload publishes: the command, the model spec, the engine (a bench variant or
#: backend/precision/layout), the batch
LABELS = ("workload", "model", "engine", "batch")

_current: dict = {}


def status_path() -> Path | None:
    """The status file this process writes (:data:`STATUS_ENV`), or None."""
    text = os.environ.get(STATUS_ENV, "").strip()
    return Path(text) if text else None


def publish(**labels) -> dict:
    """Merge ``labels`` (of :data:`LABELS`; None clears one) and write the status file, if any
    (a failed write never stops the workload); returns the labels."""
    unknown = sorted(set(labels) - set(LABELS))
    if unknown:
        raise ValueError(f"unknown workload label(s) {unknown}; known: {', '.join(LABELS)}")
    for k, v in labels.items():
        if v is None:
            _current.pop(k, None)
        else:
            _current[k] = int(v) if k == "batch" else str(v)
    path = status_path()
    if path is not None:
        body = {"pid": os.getpid(), "t_unix": time.time(), "labels": dict(_current)}
        try:
            write_text_atomic(path, json.dumps(body))
        except OSError:
            pass
    return dict(_current)


def current() -> dict:
    """What this process has published (a monitor in the same process reads it directly)."""
    return dict(_current)


def clear() -> None:
    """Nothing runs any more: every label cleared (and written)."""
    publish(**dict.fromkeys(LABELS))


def read_status(path: str | os.PathLike | None) -> dict:
    """The labels in status file ``path`` while its writer lives, else ``{}``."""
    if path is None:
        return {}
    try:
        body = json.loads(Path(path).read_text(encoding="utf-8"))
        pid, labels = int(body["pid"]), body["labels"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    if not isinstance(labels, dict) or not process_alive(pid):
        return {}
    return {k: labels[k] for k in LABELS if labels.get(k) not in (None, "")}
