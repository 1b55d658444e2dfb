import importlib.util
import os

import pytest

# CPU test modules that import the report extra (plotly) at import, absent on a bare GPU host
# running `-m gpu` (none of them holds a GPU test)
NEEDS_PLOTLY = ["test_figures.py", "test_memory.py"]
collect_ignore = [] if importlib.util.find_spec("plotly") else NEEDS_PLOTLY

os.environ.setdefault(
    "YOLO_SM_CACHE", os.path.join(os.path.dirname(__file__), "..", ".cache", "tests")
)
# under pytest-xdist: the cores split between the workers, so that two workers' torch (and the
# commands and kernels they start) do not each spin a thread a core on the same cores
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // _WORKERS)))


def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def pytest_collection_modifyitems(config, items):
    if _cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on a CUDA machine: pytest -m gpu)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _shared_notebooks(tmp_path_factory):
    """Under pytest-xdist: the folder the workers of this run share their notebook executions
    through (tests/notebook_cache.py), beside the workers' own temporary folders."""
    from tests.notebook_cache import SHARED

    os.environ.pop(SHARED, None)  # never an earlier run's
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ[SHARED] = str(tmp_path_factory.getbasetemp().parent / "notebooks")


@pytest.fixture(scope="session")
def tiny_yolo():
    from yolo_sm.core.models import build_yolo

    return build_yolo("yolov8", 0.0625)


@pytest.fixture
def make_root(tmp_path):
    """``make_root(name, datasets, source="h200")``: a dataset root ``tmp_path/name`` holding
    ``datasets`` (short names) copied with their manifest entries from the shipped root
    ``source``; returns its path. For a notebook or facts function on a root that lacks
    something (point ``DATA`` / ``open_root`` at the path)."""
    import json
    import shutil

    from yolo_sm.contract.datasets import open_root

    def make(name: str, datasets=(), source: str = "h200"):
        src = open_root(source)
        folder = tmp_path / name
        folder.mkdir(parents=True, exist_ok=True)
        entries = {}
        for d in datasets:
            entry = src.info(d)
            shutil.copy(src.path / entry["file"], folder / entry["file"])
            entries[d] = entry
        (folder / "manifest.json").write_text(json.dumps({"datasets": entries}, indent=2))
        return folder

    return make
