"""yolo_sm: how object detectors use a GPU's streaming multiprocessors.

``import yolo_sm`` is light: it imports neither torch-heavy optional backends (ultralytics,
tensorrt, onnxruntime, pynvml) nor anything else; sub-modules are imported on use.
"""

from yolo_sm._offline import set_env_defaults

set_env_defaults()

__version__ = "0.1.0"
__all__ = ["__version__"]
