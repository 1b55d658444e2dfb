"""TensorRT 10 engines: ONNX export -> plan -> execution context (``tensorrt`` imported lazily),
cached under ``<cache>/tensorrt`` as plans, int8 calibrations and timing caches."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

from yolo_sm.contract.errors import NotAvailableError, UserError, need
from yolo_sm.contract.store import atomic_file
from yolo_sm.core.engines.base import Engine
from yolo_sm.core.engines.config import EngineConfig, Precision, cache_home
from yolo_sm.core.engines.onnx import export_onnx
from yolo_sm.core.images import image_paths, load_images

PLAN_FORMAT = 1  # bump when the way plans are built changes, to invalidate cached plans


def _import_trt():
    return need(
        "tensorrt",
        "TensorRT is not installed here (pip install tensorrt on a machine with an NVIDIA GPU); "
        "choose another backend",
    )


@functools.cache
def _logger():
    """One logger per process: TensorRT warns when builders/runtimes get different loggers."""
    trt = _import_trt()
    return trt.Logger(trt.Logger.WARNING)


def engine_cache_key(
    onnx_bytes: bytes, config: EngineConfig, gpu: str, trt_version: str, calib_digest: str = ""
) -> str:
    """Hex sha256 of the ONNX bytes, precision, shape, workspace, GPU, TensorRT version and (int8)
    the calibration source and ``calib_digest``. Pure."""
    int8 = config.precision is Precision.INT8
    fields = {
        "format": PLAN_FORMAT,
        "onnx": hashlib.sha256(onnx_bytes).hexdigest(),
        "precision": config.precision.value,
        "batch": int(config.batch),
        "imgsz": int(config.imgsz),
        "workspace_mb": int(config.workspace_mb),
        "calib": [_calib_source(config), calib_digest] if int8 else None,
        "gpu": gpu,
        "trt": trt_version,
    }
    return _sha(json.dumps(fields, sort_keys=True))


def _calib_source(config: EngineConfig) -> str:
    calib = config.calib_images
    return "<bundled>" if calib is None else os.path.abspath(os.path.expanduser(str(calib)))


def calibration_digest(config: EngineConfig) -> str:
    """sha256 over the calibration images' names, sizes and modification times."""
    stats = [(p.name, p.stat()) for p in image_paths(config.calib_images)]
    return _sha("".join(f"{name}:{st.st_size}:{st.st_mtime_ns};" for name, st in stats))


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _write_atomic(path: Path, data) -> None:
    with atomic_file(path, "wb") as f:  # a unique temporary name: no planted link is followed
        f.write(memoryview(data))


def _torch_dtype(trt, dt) -> torch.dtype:
    return torch.from_numpy(np.empty(0, dtype=trt.nptype(dt))).dtype


class TrtRunner:
    """The engine's ``run``: binds a torch tensor and the output, enqueues on torch's current
    stream. Holds ``runtime``, ``engine`` (ICudaEngine) and ``context`` (IExecutionContext)."""

    def __init__(self, trt, runtime, engine, device: torch.device):
        self.runtime, self.engine, self.device = runtime, engine, device
        self.context = engine.create_execution_context()
        if self.context is None:
            raise RuntimeError("TensorRT could not create an execution context (GPU memory?)")
        io = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        inputs = [n for n in io if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        outputs = [n for n in io if n not in inputs]
        if len(inputs) != 1 or len(outputs) != 1:
            raise RuntimeError(f"expected one input and one output, got {inputs} / {outputs}")
        self.input, self.output = inputs[0], outputs[0]
        self.in_shape = tuple(engine.get_tensor_shape(self.input))
        self.out_shape = tuple(engine.get_tensor_shape(self.output))
        self.in_dtype = _torch_dtype(trt, engine.get_tensor_dtype(self.input))
        self.out_dtype = _torch_dtype(trt, engine.get_tensor_dtype(self.output))

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Run on ``x`` (converted to the input dtype, contiguous NCHW) into a new output tensor,
        asynchronously."""
        if tuple(x.shape) != self.in_shape:
            raise UserError(f"this engine takes input shape {self.in_shape}, got {tuple(x.shape)}")
        x = x.to(device=self.device, dtype=self.in_dtype).contiguous()
        out = torch.empty(self.out_shape, dtype=self.out_dtype, device=self.device)
        self.context.set_tensor_address(self.input, x.data_ptr())
        self.context.set_tensor_address(self.output, out.data_ptr())
        stream = torch.cuda.current_stream(self.device).cuda_stream
        if self.device.index == torch.cuda.current_device():
            ok = self.context.execute_async_v3(stream)
        else:  # TensorRT enqueues on the current device
            with torch.cuda.device(self.device):
                ok = self.context.execute_async_v3(stream)
        if not ok:
            raise RuntimeError("TensorRT execute_async_v3 failed (see the TensorRT log)")
        return out

    def close(self) -> None:
        torch.cuda.synchronize(self.device)
        self.context = self.engine = self.runtime = None  # context before engine before runtime


def build_tensorrt(model: torch.nn.Module, config: EngineConfig) -> Engine:
    """Build (or load cached) a TensorRT engine: fp32 (TF32 off), fp16, or int8 (+fp16, entropy
    calibrated on ``config.calib_images``); I/O fp32. ``info``: build_s, cache_hit, engine_path."""
    if config.precision in (Precision.TF32, Precision.BF16):
        raise UserError(
            f"backend tensorrt builds fp32, fp16 or int8 engines, not {config.precision.value}"
        )
    if not str(config.device).startswith("cuda"):
        raise NotAvailableError(
            "TensorRT runs only on NVIDIA GPUs; use --device cuda or another backend"
        )
    trt = _import_trt()
    device = torch.device(config.device)
    if device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    t0 = time.perf_counter()
    onnx_bytes = export_onnx(model, config).read_bytes()
    int8 = config.precision is Precision.INT8
    folder = cache_home(config.cache_dir) / "tensorrt"
    folder.mkdir(parents=True, exist_ok=True)
    with torch.cuda.device(device):
        major, minor = torch.cuda.get_device_capability(device)  # plans hold for one GPU model
        gpu = f"{torch.cuda.get_device_name(device)} sm_{major}{minor}"
        digest = calibration_digest(config) if int8 else ""
        key = engine_cache_key(onnx_bytes, config, gpu, trt.__version__, digest)
        plan_path = folder / f"{key[:32]}.plan"
        runtime = trt.Runtime(_logger())
        trt_engine = None
        if plan_path.exists():
            trt_engine = runtime.deserialize_cuda_engine(plan_path.read_bytes())
        cache_hit = trt_engine is not None
        if not cache_hit:  # no plan, or one this TensorRT/GPU cannot load: build afresh
            calib = f"{hashlib.sha256(onnx_bytes).hexdigest()}|{_calib_source(config)}|{digest}"
            calib_path = folder / f"{_sha(f'{calib}|{trt.__version__}')[:32]}.calib"
            plan = _build_plan(trt, onnx_bytes, config, device, folder, gpu, calib_path)
            _write_atomic(plan_path, plan)
            trt_engine = runtime.deserialize_cuda_engine(plan)
            if trt_engine is None:
                raise RuntimeError("TensorRT could not deserialize the plan it just built")
        runner = TrtRunner(trt, runtime, trt_engine, device)
    info = {  # build_s: export + build (or load) + context
        "build_s": time.perf_counter() - t0,
        "cache_hit": cache_hit,
        "engine_path": str(plan_path),
    }
    return Engine(
        config, runner, f"tensorrt {config.precision.value}", info=info, close_fn=runner.close
    )


def _build_plan(trt, onnx_bytes, config, device, folder: Path, gpu: str, calib_path: Path):
    """Parse the ONNX bytes and build a serialized plan (IHostMemory), updating the timing cache."""
    logger = _logger()
    builder = trt.Builder(logger)
    network = builder.create_network(0)  # TensorRT 10: explicit batch is the only mode
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(onnx_bytes):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise RuntimeError(f"TensorRT could not parse the ONNX export: {errors}")
    bc = builder.create_builder_config()
    bc.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(config.workspace_mb) << 20)
    if hasattr(trt.BuilderFlag, "TF32"):
        bc.clear_flag(trt.BuilderFlag.TF32)  # fp32 means IEEE fp32, as for the torch backends
    if config.precision in (Precision.FP16, Precision.INT8):
        if not hasattr(trt.BuilderFlag, "FP16"):
            raise NotAvailableError(
                f"TensorRT {trt.__version__} is strongly typed (no fp16/int8 builder flags); "
                "use TensorRT 10 for fp16 and int8 engines"
            )
        bc.set_flag(trt.BuilderFlag.FP16)
    if config.precision is Precision.INT8:
        bc.set_flag(trt.BuilderFlag.INT8)
        calibrator = _make_calibrator(trt, config, device, calib_path)  # alive until built
        bc.int8_calibrator = calibrator
    timing_path = folder / f"timing-{_sha(f'{gpu}|{trt.__version__}')[:16]}.cache"
    cache = bc.create_timing_cache(timing_path.read_bytes() if timing_path.exists() else b"")
    if cache is None or not bc.set_timing_cache(cache, ignore_mismatch=False):
        cache = bc.create_timing_cache(b"")  # unreadable or foreign cache: start a new one
        bc.set_timing_cache(cache, ignore_mismatch=False)
    plan = builder.build_serialized_network(network, bc)
    if plan is None:
        raise RuntimeError("TensorRT failed to build the engine (see the TensorRT log above)")
    _write_atomic(timing_path, cache.serialize())
    return plan


def _make_calibrator(trt, config: EngineConfig, device: torch.device, cache_path: Path):
    """IInt8EntropyCalibrator2 over ``config.batch``-sized batches of cycled real images (loaded
    lazily: skipped when ``cache_path`` holds a calibration cache)."""

    class EntropyCalibrator(trt.IInt8EntropyCalibrator2):
        def __init__(self):
            trt.IInt8EntropyCalibrator2.__init__(self)
            self.batches, self.index, self.buffer = None, 0, None

        def get_batch_size(self):
            return config.batch

        def get_batch(self, names, *args):
            if self.batches is None:
                images = torch.from_numpy(load_images(config.calib_images, config.imgsz))
                n_batches = -(-len(images) // config.batch)
                order = torch.arange(n_batches * config.batch) % len(images)
                self.batches = images[order].reshape(n_batches, config.batch, *images.shape[1:])
                self.buffer = torch.empty_like(self.batches[0], device=device)
            if self.index >= len(self.batches):
                return None
            self.buffer.copy_(self.batches[self.index])
            torch.cuda.synchronize(device)  # TensorRT reads the buffer on its own stream
            self.index += 1
            return [int(self.buffer.data_ptr())] * len(names)

        def read_calibration_cache(self, *args):
            return cache_path.read_bytes() if cache_path.exists() else None

        def write_calibration_cache(self, cache):
            _write_atomic(cache_path, cache)

    return EntropyCalibrator()
