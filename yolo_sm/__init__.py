"""yolo_sm: how object detectors use a GPU's streaming multiprocessors (standard library only:
the layers are imported on use)."""

import os
from pathlib import Path

#: ultralytics reads these at import time: offline, no auto-install, quiet.
OFFLINE_DEFAULTS = {
    "YOLO_OFFLINE": "1",  # no hub, no GitHub asset downloads, no update checks
    "YOLO_AUTOINSTALL": "False",  # never pip-install a missing requirement at run time
    "YOLO_VERBOSE": "False",
}


def set_env_defaults() -> None:
    """Set ultralytics' offline variables unless the user already chose them."""
    for key, value in OFFLINE_DEFAULTS.items():
        os.environ.setdefault(key, value)
    # ultralytics writes settings.json and looks for fonts in YOLO_CONFIG_DIR; keep it ours.
    os.environ.setdefault(
        "YOLO_CONFIG_DIR", str(Path.home() / ".cache" / "yolo_sm" / "ultralytics")
    )


def child_env(**values) -> dict:
    """This environment for a child process: ``values`` set (None: removed), this yolo_sm first
    on ``PYTHONPATH``."""
    env = {k: v for k, v in {**os.environ, **values}.items() if v is not None}
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


set_env_defaults()

__version__ = "0.1.0"
__all__ = ["__version__", "child_env", "set_env_defaults"]
