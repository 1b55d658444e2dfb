"""ONNX export (shared with TensorRT) and the ONNX Runtime engine."""

from __future__ import annotations

import copy
import hashlib
import time
from pathlib import Path

import numpy as np
import torch

from yolo_sm.contract.errors import NotAvailableError, UserError, need
from yolo_sm.contract.store import atomic_file
from yolo_sm.core.engines.base import Engine, head_tensor
from yolo_sm.core.engines.config import EngineConfig, Precision, cache_home

OPSET = 17


class _HeadOnly(torch.nn.Module):
    """Export wrapper: one output tensor (the head output), whatever the model returns."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x):
        return head_tensor(self.model(x))


def export_onnx(model: torch.nn.Module, config: EngineConfig) -> Path:
    """Export ``model`` (fp32 NCHW, the config's shape) to ONNX under the cache (TorchScript
    exporter), named by a weight hash so a re-export is skipped; written atomically."""
    need("onnx", "ONNX export needs the 'onnx' package: pip install onnx")
    m = _HeadOnly(copy.deepcopy(model).float().cpu().eval())
    key = _model_key(m, config)
    path = cache_home(config.cache_dir) / "onnx" / f"{key}.onnx"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    x = torch.rand(config.batch, 3, config.imgsz, config.imgsz)
    # a unique, exclusively created temp renamed over ``path``: a failed export leaves no half
    # file in the cache, and no planted link is followed
    with atomic_file(path, "wb") as fh, torch.no_grad():
        torch.onnx.export(
            m,
            (x,),
            fh,
            opset_version=OPSET,
            input_names=["images"],
            output_names=["output0"],
            dynamo=False,
            do_constant_folding=True,
        )
    return path


def _model_key(m: torch.nn.Module, config: EngineConfig) -> str:
    h = hashlib.sha256()
    for name, t in m.state_dict().items():
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    h.update(f"b{config.batch}-{config.imgsz}-op{OPSET}-torch{torch.__version__}".encode())
    return h.hexdigest()[:20]


def build_onnxruntime(model: torch.nn.Module, config: EngineConfig) -> Engine:
    """ONNX Runtime session on the exported model: CPU provider on CPU, CUDA provider on a GPU
    (needs onnxruntime-gpu). fp32 only: ORT's fp16 path needs a converted model."""
    ort = need("onnxruntime", "backend onnxruntime needs 'onnxruntime': pip install onnxruntime")
    if config.precision not in (Precision.FP32,):
        raise UserError("backend onnxruntime runs fp32 here; choose --precisions fp32 for it")
    on_gpu = str(config.device).startswith("cuda")
    available = ort.get_available_providers()
    if on_gpu and "CUDAExecutionProvider" not in available:
        raise NotAvailableError(
            "onnxruntime has no CUDA provider here (install onnxruntime-gpu), so it cannot run "
            f"on {config.device}; available providers: {', '.join(available)}"
        )
    t0 = time.perf_counter()
    path = export_onnx(model, config)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    providers = ["CUDAExecutionProvider"] if on_gpu else ["CPUExecutionProvider"]
    session = ort.InferenceSession(str(path), sess_options=opts, providers=providers)
    build_s = time.perf_counter() - t0
    out_name = session.get_outputs()[0].name

    if on_gpu:
        device_id = torch.device(config.device).index or 0
        binding = session.io_binding()

        def run(x: torch.Tensor) -> torch.Tensor:
            x = x.float().contiguous()
            binding.bind_input(
                "images", "cuda", device_id, np.float32, tuple(x.shape), x.data_ptr()
            )
            binding.bind_output(out_name, "cuda", device_id)
            torch.cuda.current_stream().synchronize()
            session.run_with_iobinding(binding)
            return torch.from_numpy(binding.copy_outputs_to_cpu()[0]).to(config.device)
    else:

        def run(x: torch.Tensor) -> torch.Tensor:
            arr = x.float().contiguous().numpy()
            return torch.from_numpy(session.run([out_name], {"images": arr})[0])

    info = {"build_s": build_s, "onnx_path": str(path)}
    return Engine(config, run, f"onnxruntime {providers[0]} fp32", info=info)
