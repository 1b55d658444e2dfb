"""Real images as model inputs: read, letterbox, scale (ultralytics and cv2 imported lazily)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from yolo_sm.contract.errors import UserError
from yolo_sm.core.offline import prepare_ultralytics

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")


def bundled_images() -> list[Path]:
    """ultralytics' bundled ``bus.jpg`` (810x1080) and ``zidane.jpg`` (1280x720)."""
    prepare_ultralytics()
    from ultralytics.utils import ASSETS

    return [Path(ASSETS) / "bus.jpg", Path(ASSETS) / "zidane.jpg"]


def image_paths(source: str | Path | None = None) -> list[Path]:
    """The image files ``source`` names: a file, a folder's images by name, None: the bundled."""
    if source is None:
        return bundled_images()
    path = Path(source).expanduser()
    if path.is_dir():
        paths = sorted(p for p in path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        paths = [p for p in paths if p.is_file()]
        if not paths:
            raise UserError(f"image folder {str(path)!r} holds no {'/'.join(IMAGE_SUFFIXES)} files")
        return paths
    if path.is_file():
        return [path]
    raise UserError(f"image source {str(path)!r} is neither an image file nor a folder")


def load_images(source: str | Path | None = None, imgsz: int | tuple[int, int] = 640) -> np.ndarray:
    """``source``'s images as one float32 RGB batch (N, 3, H, W) in [0, 1], letterboxed as
    ultralytics predicts to ``imgsz`` or (height, width)."""
    import cv2

    prepare_ultralytics()
    from ultralytics.data.augment import LetterBox

    shape = (int(imgsz), int(imgsz)) if np.ndim(imgsz) == 0 else tuple(map(int, imgsz))
    letterbox = LetterBox(new_shape=shape, auto=False, scaleup=True, center=True)
    images = []
    for path in image_paths(source):
        bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
        if bgr is None:
            raise UserError(f"cannot read {str(path)!r} as an image")
        rgb = letterbox(image=bgr)[:, :, ::-1]  # HWC uint8, BGR -> RGB
        images.append(np.ascontiguousarray(rgb.transpose(2, 0, 1), dtype=np.float32) / 255.0)
    return np.stack(images)
