import os

import pytest

os.environ.setdefault(
    "YOLO_SM_CACHE", os.path.join(os.path.dirname(__file__), "..", ".cache", "tests")
)


def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def pytest_collection_modifyitems(config, items):
    if _cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the H200: pytest -m gpu)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def tiny_yolo():
    from yolo_sm.collect.models import build_yolo

    return build_yolo("yolov8", 0.0625)
