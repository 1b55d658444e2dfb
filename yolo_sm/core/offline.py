"""ultralytics imported offline: no auto-install, sync or font download, our thread count."""

from __future__ import annotations

import os
from pathlib import Path

from yolo_sm import set_env_defaults
from yolo_sm.contract.store import copy_atomic

_prepared = False


def prepare_ultralytics() -> None:
    """Import ultralytics with sync off and a local font, keeping our thread count."""
    global _prepared
    if _prepared:
        return
    set_env_defaults()
    import torch

    threads = int(os.environ.get("YOLO_SM_THREADS", "0")) or torch.get_num_threads()
    cfg_dir = Path(os.environ["YOLO_CONFIG_DIR"])
    cfg_dir.mkdir(parents=True, exist_ok=True)
    _install_local_font(cfg_dir)

    import ultralytics  # noqa: F401  (import for its side effects, now controlled)
    from ultralytics.utils import SETTINGS

    if SETTINGS.get("sync", False):
        SETTINGS.update({"sync": False})
    torch.set_num_threads(threads)
    _prepared = True


def _install_local_font(cfg_dir: Path) -> None:
    """A local TTF as ``Arial.ttf`` in ultralytics' config dir, which it would download."""
    for name in ("Arial.ttf", "Arial.Unicode.ttf"):
        target = cfg_dir / name
        if target.exists():
            continue
        source = _find_ttf()
        if source is not None:
            copy_atomic(source, target)


def _find_ttf() -> Path | None:
    candidates: list[Path] = []
    try:
        import matplotlib

        candidates.append(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf")
    except ImportError:
        pass
    candidates += [
        Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"),
        Path("/usr/share/fonts/TTF/DejaVuSans.ttf"),
    ]
    return next((p for p in candidates if p.exists()), None)
