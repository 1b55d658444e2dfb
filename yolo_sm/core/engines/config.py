"""Engine configuration: frozen dataclass + str Enums; ``asdict(config)`` leads every result row."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from yolo_sm.contract import values
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.vocab import (
    INT8_BACKENDS,
    INT8_BACKENDS_ONLY,
    INT8_CALIBRATIONS,
    INT8_KERNELS,
    INT8_PERCENTILE,
    TOLERANCE,
    Backend,
    Layout,
    Precision,
)

#: the int8 kernels torch.compile runs (cuDNN's graphs as one custom op; emulation on a CPU)
COMPILE_KERNELS = ("auto", "cudnn", "emulate")


def cache_home(cache_dir=None, environ=None) -> Path:
    """The cache root: ``cache_dir``, else ``$YOLO_SM_CACHE``, else ``~/.cache/yolo_sm``."""
    env = os.environ if environ is None else environ
    return Path(cache_dir or env.get("YOLO_SM_CACHE") or Path.home() / ".cache" / "yolo_sm")


def _enum(cls, value, what):
    try:
        return cls(str(value).lower() if not isinstance(value, cls) else value)
    except ValueError:
        choices = ", ".join(m.value for m in cls)
        raise UserError(f"unknown {what} {value!r}: choose one of {choices}") from None


def check_compile_mode(mode: str) -> str:
    """A torch.compile mode, optionally with model rewrites (``default+sep-pool``), lower-cased;
    one sentence otherwise."""
    return values.compile_mode(mode, "compile mode")


@dataclass(frozen=True)
class EngineConfig:
    """How to run a model: backend, numerics, layout and the fixed input shape (``batch`` x 3 x
    ``imgsz``², or ``imgsz_hw`` = (height, width), multiples of 32, ``imgsz`` the longer side)."""

    backend: Backend = Backend.EAGER
    precision: Precision = Precision.FP16
    layout: Layout = Layout.NHWC
    batch: int = 1
    imgsz: int = 640
    device: str = "cuda"
    compile_mode: str = "default"  # torch.compile mode (backend "compile" only)
    cudnn_benchmark: bool = True  # let cuDNN time its algorithms per shape (GPU only)
    workspace_mb: int = 4096  # TensorRT builder workspace limit
    calib_images: str | None = None  # TensorRT int8: image folder (None: ultralytics' bus/zidane)
    cache_dir: str | None = None  # ONNX exports, TensorRT engines + timing cache (None: ~/.cache)
    check: bool = True  # compare with the eager fp32 model at build time
    int8_calibration: str = "max"  # max | percentile
    int8_percentile: float = INT8_PERCENTILE  # the percentile of |x| (calibration percentile)
    int8_kernel: str = "auto"  # the int8 convolutions' kernel (vocab.INT8_KERNELS)
    int8_handoff: bool = True  # int8 hand-offs between convs (engines.int8.link_handoffs)
    imgsz_hw: tuple[int, int] | None = None  # (height, width) of a non-square input

    def __post_init__(self) -> None:
        object.__setattr__(self, "backend", _enum(Backend, self.backend, "backend"))
        object.__setattr__(self, "precision", _enum(Precision, self.precision, "precision"))
        object.__setattr__(self, "layout", _enum(Layout, self.layout, "layout"))
        for name in ("batch", "imgsz"):
            object.__setattr__(self, name, values.whole(getattr(self, name), name, lo=1))
        if self.imgsz_hw is not None:
            try:
                hw = tuple(self.imgsz_hw)
            except TypeError:
                hw = ()
            if len(hw) != 2:
                msg = "imgsz_hw must be (height, width), two positive integers, got"
                raise UserError(f"{msg} {self.imgsz_hw!r}")
            hw = tuple(values.whole(v, "imgsz_hw", lo=1) for v in hw)
            if hw[0] % 32 or hw[1] % 32:
                raise UserError(f"imgsz_hw must be multiples of 32, got {hw[0]}x{hw[1]}")
            object.__setattr__(self, "imgsz_hw", hw)
            object.__setattr__(self, "imgsz", max(hw))
            if hw[0] != hw[1] and self.backend in (Backend.ONNXRUNTIME, Backend.TENSORRT):
                raise UserError(
                    f"backend {self.backend.value} takes square inputs here, not {hw[0]}x{hw[1]}"
                )
        if self.imgsz % 32:
            raise UserError(f"imgsz must be a positive multiple of 32, got {self.imgsz!r}")
        object.__setattr__(self, "compile_mode", check_compile_mode(self.compile_mode))
        if not str(self.device).startswith(("cpu", "cuda")):
            raise UserError(f"device must be 'cpu' or 'cuda[:N]', got {self.device!r}")
        half = self.precision in (Precision.FP16, Precision.BF16)
        if self.backend is Backend.COPYFREE and not (half and self.layout is Layout.NHWC):
            raise UserError("backend copyfree runs fp16 or bf16 in the nhwc layout only")
        int8 = self.precision is Precision.INT8
        if int8 and self.backend not in INT8_BACKENDS:
            raise UserError(f"precision {INT8_BACKENDS_ONLY}")
        if int8 and self.backend is Backend.COMPILE and self.int8_kernel not in COMPILE_KERNELS:
            raise UserError(
                f"int8 kernel {self.int8_kernel} does not run under torch.compile: choose one of "
                f"{', '.join(COMPILE_KERNELS)}"
            )
        for what, value, choices in (
            ("calibration", self.int8_calibration, INT8_CALIBRATIONS),
            ("kernel", self.int8_kernel, INT8_KERNELS),
        ):
            if value not in choices:
                msg = f"unknown int8 {what} {value!r}: choose one of {', '.join(choices)}"
                raise UserError(msg)
        p = values.number(self.int8_percentile, "int8_percentile", lo=50, hi=100)
        object.__setattr__(self, "int8_percentile", p)
        if not isinstance(self.int8_handoff, bool):
            raise UserError(f"int8_handoff must be true or false, got {self.int8_handoff!r}")
        fp8_backends = (Backend.EAGER, Backend.CUDAGRAPH)
        if self.precision is Precision.FP8 and self.backend not in fp8_backends:
            raise UserError("precision fp8 runs on the eager and cudagraph backends only")

    @property
    def input_hw(self) -> tuple[int, int]:
        """(height, width) of one input image: ``imgsz_hw``, else ``imgsz`` x ``imgsz``."""
        return self.imgsz_hw if self.imgsz_hw is not None else (self.imgsz, self.imgsz)

    @property
    def tolerance(self) -> float:
        return TOLERANCE[self.precision]

    def label(self) -> str:
        return f"{self.backend.value}/{self.precision.value}/{self.layout.value}/b{self.batch}"
