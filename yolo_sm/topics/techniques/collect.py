"""Three techniques measured side by side in one process (table kind ``techniques``, one row per
variant, backend and batch): ``fusion`` (ResNet with BatchNorm kept, folded, and conv + bias +
residual add + ReLU fused), ``autocast`` (the fp32 YOLO model under ``torch.autocast`` against the
model cast to 16 bits, plus the ``autocast_dtypes`` record) and ``batch_buffer`` (a new
``torch.stack`` per step against a buffer allocated once). The 16-bit type is fp16 on a GPU, bf16
on a CPU; CUDA graphs need a GPU.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
from torch.utils._pytree import tree_leaves

from yolo_sm.contract.errors import NotAvailableError, UserError
from yolo_sm.contract.vocab import TOLERANCE
from yolo_sm.core.engines.base import (
    head_tensor,
    make_input,
    numerics,
    photo_input,
    reference_output,
    relative_l2,
)
from yolo_sm.core.engines.config import EngineConfig, Precision
from yolo_sm.core.engines.torch_backends import prepare_module
from yolo_sm.core.grid import free_memory
from yolo_sm.core.models import build_yolo, hooked, resnet_backbone
from yolo_sm.core.models.fused import ConvAddReLU, ConvReLU, count_modules, fold_bn, fuse_conv_relu
from yolo_sm.core.profiling import kineto
from yolo_sm.core.sweep import failure
from yolo_sm.core.timing import host_profile, measure
from yolo_sm.topics.techniques.analyse import kernel_mix_of

BACKENDS = ("eager", "cudagraph")
TORCH_DTYPES = {Precision.FP16: torch.float16, Precision.BF16: torch.bfloat16}


def low_precision(device: str) -> Precision:
    """fp16 on a GPU, bf16 on a CPU (the type CPU autocast casts to)."""
    return Precision.FP16 if on_gpu(device) else Precision.BF16


def on_gpu(device: str) -> bool:
    return str(device).startswith("cuda")


def config(device, batch, imgsz, precision, backend="eager") -> EngineConfig:
    """The NHWC engine config of a point (no build-time check: rows check themselves)."""
    return EngineConfig(backend=backend, precision=precision, layout="nhwc", batch=batch,
                        imgsz=imgsz, device=device, check=False)  # fmt: skip


def sync(device) -> None:
    if on_gpu(device):
        torch.cuda.synchronize()


def eager_runner(module, cfg: EngineConfig, autocast: Precision | None = None) -> Callable:
    """One forward of ``module``, under ``torch.autocast`` to ``autocast`` when given (no cast
    cache)."""
    device_type = "cuda" if on_gpu(cfg.device) else "cpu"

    def run(x):
        with numerics(cfg), torch.inference_mode():
            if autocast is None:
                return head_tensor(module(x))
            with torch.autocast(device_type, dtype=TORCH_DTYPES[autocast], cache_enabled=False):
                return head_tensor(module(x))

    return run


def graph_runner(fn: Callable, static_in: torch.Tensor, warmup: int = 3):
    """``(run, close)``: ``fn(static_in)`` captured in one CUDA graph; ``run(x)`` copies ``x`` in
    unless it is ``static_in``."""
    if not static_in.is_cuda:
        raise NotAvailableError("backend cudagraph needs a CUDA device; use backend eager on CPU")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn(static_in)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = fn(static_in)
    torch.cuda.synchronize()

    def run(x):
        if x is not static_in:
            static_in.copy_(x)
        graph.replay()
        return static_out

    return run, graph.reset


def runner(fn: Callable, cfg: EngineConfig, static_in: torch.Tensor):
    """``(run, close)`` of ``fn`` for the config's backend (eager, cudagraph)."""
    if cfg.backend.value == "eager":
        return fn, lambda: None
    if cfg.backend.value == "cudagraph":
        return graph_runner(fn, static_in)
    raise UserError(f"techniques run the backends {', '.join(BACKENDS)}, not {cfg.backend.value}")


def kernel_mix(fn: Callable, device: str, iters: int = 2) -> dict:
    """:func:`~yolo_sm.topics.techniques.analyse.kernel_mix_of` of a Kineto pass of ``iters`` calls;
    NaN on a CPU."""
    if not on_gpu(device):
        return kernel_mix_of(None, iters)
    with tempfile.TemporaryDirectory() as tmp:
        path = kineto.capture(fn, Path(tmp) / "mix.json.gz", iters=iters, warmup=1, device=device,
                              provenance={"device": device})  # fmt: skip
        return kernel_mix_of(kineto.load_kernels(path), iters)


def timed(fn, batch, device, warmup_ms, budget_ms, label="") -> dict:
    """:func:`yolo_sm.core.timing.measure` of ``fn``, as a row's summary columns."""
    return measure(fn, batch=batch, device=device, warmup_ms=warmup_ms, budget_ms=budget_ms,
                   label=label, with_provenance=False).summary()  # fmt: skip


def point(row: dict, work: Callable, *args) -> dict:
    """``row`` with what ``work(*args)`` measured, or with the failure's status and message."""
    try:
        return {**row, "status": "ok", "message": "", **work(*args)}
    except Exception as e:  # noqa: BLE001 - every failure is a row, the table goes on
        return {**row, **failure(e)}
    finally:
        free_memory(collect=False)


def checked(row: dict, rel_err: float, precision: Precision) -> dict:
    """``rel_err`` into the row; beyond the precision's tolerance the row is an error."""
    row["rel_err"] = rel_err
    tol = TOLERANCE[precision]
    if not rel_err <= tol:
        row.update(
            status="error",
            message=f"relative L2 error {rel_err:.3g} vs eager fp32 exceeds the "
            f"{precision.value} tolerance {tol:g}",
        )
    return row


def forward_point(model, cfg, ref, autocast, warmup_ms, budget_ms, iters) -> dict:
    """One forward point: its error against ``ref`` on the photos, its timing and (eager) its kernel
    mix."""
    module_cfg = cfg if autocast is None else config(cfg.device, cfg.batch, cfg.imgsz, "fp32")
    module = prepare_module(model, module_cfg)
    static_in = make_input(module_cfg, seed=0)
    run, close = runner(eager_runner(module, module_cfg, autocast), cfg, static_in)
    try:
        photos = photo_input(module_cfg)
        with torch.no_grad():
            rel = relative_l2(head_tensor(run(photos)).clone(), ref)
        # timed on the photos: the graph's static input holds them since the check
        x = photos if cfg.backend.value == "eager" else static_in
        out = timed(lambda: run(x), cfg.batch, cfg.device, warmup_ms, budget_ms, cfg.label())
        if cfg.backend.value == "eager":
            out.update(kernel_mix(lambda: run(x), cfg.device, iters))
        return checked(out, rel, cfg.precision)
    finally:
        close()
        sync(cfg.device)


TECHNIQUES = ("fusion", "autocast", "batch_buffer")

#: the residual branches' scale of the fusion technique's ResNet
#: (:func:`yolo_sm.core.models.resnet.resnet_backbone`): at 1.0 its fp16 forward lies ~0.4
#: from fp32 and every variant fails the fp16 check; 0.2 brings bf16 within 0.01 on a CPU
RESIDUAL_SCALE = 0.2


def fusion_models(depth: int = 101, residual_scale: float = RESIDUAL_SCALE) -> dict:
    """The fusion variants' ResNet detectors, same weights; residual branches scaled so that 16 bits
    pass the check."""
    unfused = resnet_backbone(depth, fuse=False, residual_scale=residual_scale)
    folded = fold_bn(unfused)
    return {"bn_unfused": unfused, "bn_folded": folded, "conv_bias_relu": fuse_conv_relu(folded)}


def fusion_rows(
    *, depth, imgsz, batches, backends, device, warmup_ms, budget_ms, profile_iters
) -> list[dict]:
    """One row per (batch, backend, variant) of the ResNet detector, 16-bit NHWC, checked against
    eager fp32."""
    prec = low_precision(device)
    models = fusion_models(depth)
    bn = {v: count_modules(m, torch.nn.BatchNorm2d) for v, m in models.items()}
    fused = {
        v: count_modules(m, ConvReLU) + count_modules(m, ConvAddReLU) for v, m in models.items()
    }
    rows = []
    for batch in batches:
        cfg32 = config(device, batch, imgsz, "fp32")
        ref = reference_output(models["bn_unfused"], cfg32, photo_input(cfg32))
        for backend in backends:
            cfg = config(device, batch, imgsz, prec, backend)
            for variant, model in models.items():
                row = {"technique": "fusion", "model": f"resnet{depth}", "family": f"resnet{depth}",
                       "width": 1.0, "variant": variant, "backend": backend, "scope": "forward",
                       "batch": batch, "imgsz": imgsz, "precision": prec.value, "layout": "nhwc",
                       "device": device, "bn_modules": bn[variant],
                       "fused_conv_modules": fused[variant]}  # fmt: skip
                args = (model, cfg, ref, None, warmup_ms, budget_ms, profile_iters)
                rows.append(point(row, forward_point, *args))
    return rows


def techniques_table(
    *,
    techniques=TECHNIQUES,
    device="cuda",
    backends=BACKENDS,
    warmup_ms=30.0,
    budget_ms=150.0,
    profile_iters=2,
    resnet_depth=101,
    resnet_imgsz=640,
    resnet_batches=(1, 16, 64),
    widths=(0.5, 1.0),
    autocast_batches=(16, 64),
    buffer_width=0.5,
    buffer_batches=(16, 64),
    imgsz=640,
):
    """The ``techniques`` table: the rows of each technique asked for, in one process."""
    import pandas as pd

    common = dict(backends=tuple(backends), device=device, warmup_ms=warmup_ms, budget_ms=budget_ms)
    models: dict = {}  # YOLOv8 per width, shared by autocast and the batch buffer
    rows = []
    if "fusion" in techniques:
        rows += fusion_rows(depth=resnet_depth, imgsz=resnet_imgsz, batches=tuple(resnet_batches),
                            profile_iters=profile_iters, **common)  # fmt: skip
    if "autocast" in techniques:
        rows += autocast_rows(widths=tuple(widths), batches=tuple(autocast_batches), imgsz=imgsz,
                              profile_iters=profile_iters, models=models, **common)  # fmt: skip
    if "batch_buffer" in techniques:
        rows += buffer_rows(
            width=buffer_width, batches=tuple(buffer_batches), imgsz=imgsz, models=models, **common
        )
    df = pd.DataFrame(rows)
    if "samples_ms" in df:  # failed rows have no samples: None, not NaN, in a list column
        df["samples_ms"] = df["samples_ms"].map(lambda v: list(v) if isinstance(v, list) else None)
    for c in ("static_buffer", "graph_input_copy", "noisy", "l2_flush"):
        if c in df:
            df[c] = df[c].astype(object).where(df[c].notna(), None)
    return df


AUTOCAST_VARIANTS = ("autocast", "half_model")
LOW_DTYPES = ("float16", "bfloat16")
RECORD = ("layer", "module_type", "input_dtype", "output_dtype")


def _dtype_name(v) -> str:
    """The dtype of the first tensor in ``v`` (nested), "" without one."""
    t = next((x for x in tree_leaves(v) if isinstance(x, torch.Tensor)), None)
    return str(t.dtype).replace("torch.", "") if t is not None else ""


def output_dtypes(model, x, device_type: str, dtype) -> list[dict]:
    """Per module call of ``model(x)`` under autocast: layer, module type, first input and output
    dtypes."""
    records = []

    def hook(name):
        def fn(mod, args, out):
            kind, dtypes = type(mod).__name__, (_dtype_name(args), _dtype_name(out))
            records.append(dict(zip(RECORD, (name, kind, *dtypes), strict=True)))

        return fn

    hooks = [m.register_forward_hook(hook(n)) for n, m in model.named_modules() if n]
    autocast = torch.autocast(device_type, dtype=dtype, cache_enabled=False)
    with hooked(hooks), torch.no_grad(), autocast:
        model(x)
    return records


def dtype_summary(records: list[dict]) -> list[dict]:
    """Per module type: ``calls``, ``fp32_output_calls`` and ``upcast_calls`` (16-bit in, float32
    out)."""
    import pandas as pd

    d = pd.DataFrame(records, columns=["module_type", "input_dtype", "output_dtype"])
    fp32 = d.output_dtype == "float32"
    d = d.assign(calls=1, fp32_output_calls=fp32.astype(int),
                 upcast_calls=(fp32 & d.input_dtype.isin(LOW_DTYPES)).astype(int))  # fmt: skip
    g = d.groupby("module_type")[["calls", "fp32_output_calls", "upcast_calls"]].sum()
    return [{"module_type": t, **{k: int(v) for k, v in r.items()}} for t, r in g.iterrows()]


def yolo(width, models: dict):
    """YOLOv8 at ``width``, built once per ``models`` cache."""
    if float(width) not in models:
        models[float(width)] = build_yolo("yolov8", float(width))
    return models[float(width)]


def autocast_rows(
    *, widths, batches, backends, imgsz, device, warmup_ms, budget_ms, profile_iters, models
) -> list[dict]:
    """Per YOLOv8 width: the autocast dtype record (batch 2), then a forward point per batch,
    backend and variant."""
    prec = low_precision(device)
    device_type = "cuda" if on_gpu(device) else "cpu"
    rows = []
    for width in widths:
        model = yolo(width, models)
        head = {"model": f"yolov8:{float(width):g}", "family": "yolov8", "width": float(width),
                "imgsz": imgsz, "precision": prec.value, "layout": "nhwc",
                "device": device}  # fmt: skip
        cfg32 = config(device, 2, imgsz, "fp32")
        m32 = prepare_module(model, cfg32)
        records = output_dtypes(m32, photo_input(cfg32), device_type, TORCH_DTYPES[prec])
        del m32
        rows += [{**head, "technique": "autocast_dtypes", "variant": "autocast", "backend": "eager",
                  "scope": "dtypes", "batch": 2, "status": "ok", "message": "", **s}
                 for s in dtype_summary(records)]  # fmt: skip
        for batch in batches:
            cfg32 = config(device, batch, imgsz, "fp32")
            ref = reference_output(model, cfg32, photo_input(cfg32))
            for backend in backends:
                cfg = config(device, batch, imgsz, prec, backend)
                for variant in AUTOCAST_VARIANTS:
                    row = {**head, "technique": "autocast", "variant": variant, "backend": backend,
                           "scope": "forward", "batch": batch}  # fmt: skip
                    auto = prec if variant == "autocast" else None
                    args = (model, cfg, ref, auto, warmup_ms, budget_ms, profile_iters)
                    rows.append(point(row, forward_point, *args))
    return rows


BUFFER_VARIANTS = ("stack_new", "prealloc_copy", "prealloc_stack_out")


def frames_on(device, n: int, imgsz: int, dtype, seed: int = 0) -> list[torch.Tensor]:
    """``n`` decoded frames as per-frame device tensors (H, W, 3) in ``dtype``, in [0, 1)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    return [torch.rand(imgsz, imgsz, 3, generator=gen, device=device).to(dtype) for _ in range(n)]


def assemblers(
    frames: list[torch.Tensor], buf: torch.Tensor, view: torch.Tensor | None = None
) -> dict[str, Callable]:
    """Per buffer variant, a function that assembles ``frames`` into ``buf`` (or anew) and returns
    the (B, 3, H, W) ``view``."""
    view = buf.permute(0, 3, 1, 2) if view is None else view

    def stack_new():
        return torch.stack(frames).permute(0, 3, 1, 2)

    def prealloc_copy():
        for i, f in enumerate(frames):
            buf[i].copy_(f)
        return view

    def prealloc_stack_out():
        torch.stack(frames, out=buf)
        return view

    return dict(zip(BUFFER_VARIANTS, (stack_new, prealloc_copy, prealloc_stack_out), strict=True))


def buffer_engine(model, cfg):
    """``(run, close, buf, view)``: for a CUDA graph ``view`` is its static input, so ``run`` copies
    nothing."""
    module = prepare_module(model, cfg)
    static_in = make_input(cfg, seed=0)
    run, close = runner(eager_runner(module, cfg), cfg, static_in)
    if cfg.backend.value == "cudagraph":
        return run, close, static_in.permute(0, 2, 3, 1), static_in
    shape = (cfg.batch, cfg.imgsz, cfg.imgsz, 3)
    buf = torch.empty(shape, dtype=static_in.dtype, device=cfg.device)
    return run, close, buf, buf.permute(0, 3, 1, 2)


def _assembly(fn, batch, device, warmup_ms, budget_ms, label) -> dict:
    return {
        **timed(fn, batch, device, warmup_ms, budget_ms, label),
        **host_profile(fn, device=device),
    }


def _step(built, cfg, frames, variant, warmup_ms, budget_ms) -> dict:
    """Assembly + forward of one variant on a built engine (or raise its build's error)."""
    if isinstance(built, BaseException):
        raise built
    run, _, buf, view = built
    assemble = assemblers(frames, buf, view)[variant]
    if variant != "stack_new" and assemble().data_ptr() != buf.data_ptr():
        raise RuntimeError(f"{variant} did not write into its buffer")
    label = f"{cfg.label()} {variant}"
    return timed(lambda: run(assemble()), cfg.batch, cfg.device, warmup_ms, budget_ms, label)


def buffer_rows(
    *, width, batches, backends, imgsz, device, warmup_ms, budget_ms, models
) -> list[dict]:
    """Per batch: each variant's assembly alone, then assembly + forward of YOLOv8 per backend."""
    prec = low_precision(device)
    model = yolo(width, models)
    rows = []
    for batch in batches:
        head = {"technique": "batch_buffer", "model": f"yolov8:{float(width):g}",
                "family": "yolov8", "width": float(width), "batch": batch, "imgsz": imgsz,
                "precision": prec.value, "layout": "nhwc", "device": device}  # fmt: skip
        frames = frames_on(device, batch, imgsz, TORCH_DTYPES[prec])
        buf = torch.empty(batch, imgsz, imgsz, 3, dtype=TORCH_DTYPES[prec], device=device)
        for variant, fn in assemblers(frames, buf).items():
            row = {**head, "variant": variant, "backend": "none", "scope": "assembly",
                   "static_buffer": variant != "stack_new", "graph_input_copy": False}  # fmt: skip
            rows.append(point(row, _assembly, fn, batch, device, warmup_ms, budget_ms, variant))
        for backend in backends:
            cfg = config(device, batch, imgsz, prec, backend)
            try:
                built = buffer_engine(model, cfg)
            except Exception as e:  # noqa: BLE001 - the build's failure is each variant's row
                built = e
            for variant in BUFFER_VARIANTS:
                row = {**head, "variant": variant, "backend": backend, "scope": "step"}
                row["static_buffer"] = variant != "stack_new"
                row["graph_input_copy"] = backend == "cudagraph" and variant == "stack_new"
                rows.append(point(row, _step, built, cfg, frames, variant, warmup_ms, budget_ms))
            if not isinstance(built, BaseException):
                built[1]()
            del built
            sync(device)
        del frames, buf
    return rows
