"""Activation memory of a forward, collected on the device.

Lifetimes: a ``TorchDispatchMode`` sees every ATen op; each returned tensor whose storage is new
(not a view or in-place result) is an *activation*, created at that op's step; its *last use* is
the last op that reads its storage, its *release* the step after which its storage was freed (weak
references): what eager PyTorch did. Forward hooks attribute ops to layers and, on a GPU, read the
caching allocator after every layer and around every op (``transient_bytes``).

Pool: one eager model runs ``forwards`` random (seeded) batch sizes; after every forward
``torch.cuda.memory_stats`` gives allocated, reserved and inactive-split bytes, segments, retries
and the forward's peaks. The allocator reads ``PYTORCH_CUDA_ALLOC_CONF`` once, when CUDA starts,
so each configuration runs in its own fresh process (:func:`pool_table`).
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from yolo_sm import child_env
from yolo_sm.contract.errors import UserError
from yolo_sm.core.engines import EngineConfig, build_engine
from yolo_sm.core.engines.base import DTYPES
from yolo_sm.core.models import ResNetDetector, build_yolo, hooked, layers, resnet_backbone

#: the models of the lifetime section: YOLOv8 at four widths and the ResNet-101 detector
DEFAULT_LIFETIME_MODELS: tuple[dict, ...] = (
    {"model": "yolov8", "widths": [0.25, 0.5, 1.0, 2.0]},
    {"model": "resnet101"},
)

COLUMNS = (
    "model", "family", "width", "batch", "imgsz", "precision", "layout", "device", "level",
    "index", "layer", "layer_index", "module_type", "stage", "from_layers", "out_bytes",
    "created_at_step", "freed_after_step", "held_until_step", "lifetime_steps", "last_use_layer",
    "transient_bytes", "live_bytes_after", "held_bytes_after", "measured_allocated_bytes",
    "measured_peak_bytes", "weight_bytes", "input_bytes", "resident_bytes", "steps",
)  # fmt: skip
#: the integer columns of the table
_INTS = ("index", "layer_index", "created_at_step", "freed_after_step", "held_until_step",
         "lifetime_steps", "last_use_layer")  # fmt: skip


@dataclass(frozen=True)
class MemoryLayer:
    """A layer ops are attributed to (``from_layers``: YOLO's ``f``, -1 the previous)."""

    position: int
    name: str
    module_type: str
    stage: str
    from_layers: str
    module: torch.nn.Module


def memory_layers(model: torch.nn.Module) -> list[MemoryLayer]:
    """The layers of ``model`` in forward order, ResNet stages split into blocks (``layer3.7``)."""
    out: list[MemoryLayer] = []
    resnet = isinstance(model, ResNetDetector)
    for ref in layers(model):
        f = getattr(ref.module, "f", -1)
        src = ",".join(map(str, f)) if isinstance(f, (list, tuple)) else str(f)
        if resnet and ref.name.startswith("layer"):
            for j, b in enumerate(ref.module):
                out.append(
                    MemoryLayer(len(out), f"{ref.name}.{j}", type(b).__name__, ref.stage, "-1", b)
                )
            continue
        out.append(MemoryLayer(len(out), ref.name, ref.module_type, ref.stage, src, ref.module))
    return out


@dataclass
class _Activation:
    index: int
    nbytes: int
    op: str
    layer: int
    created: int
    last_use: int
    last_use_layer: int
    released: int | None = None
    refs: int = 0
    transient: float = math.nan


def _key(t: torch.Tensor) -> int:
    try:
        return int(t.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError):  # a tensor without storage (meta, sparse)
        return 0


class _Recorder(TorchDispatchMode):
    """Records every activation of the ops dispatched while it is active (module docstring)."""

    def __init__(self, cuda: bool):
        super().__init__()
        self.cuda = cuda
        self.step = -1
        self.layer = -1
        self.acts: list[_Activation] = []
        self.by_key: dict[int, _Activation] = {}
        self.op_layer: list[int] = []
        self.refs: list[weakref.ref] = []  # kept so that their callbacks fire
        self.layer_out: dict[int, list[_Activation]] = {}
        self.layer_mem: dict[int, tuple[float, float]] = {}
        self.base = 0
        self.layer_peak = 0.0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.step += 1
        step = self.step
        self.op_layer.append(self.layer)
        in_keys = set()
        for t in tree_leaves((args, kwargs)):
            if isinstance(t, torch.Tensor):
                k = _key(t)
                in_keys.add(k)
                act = self.by_key.get(k)
                if act is not None and act.released is None:
                    act.last_use, act.last_use_layer = step, self.layer
        if self.cuda:  # the op's own peak: allocated and freed inside it
            torch.cuda.reset_peak_memory_stats()
        out = func(*args, **kwargs)
        transient = math.nan
        if self.cuda:
            peak = torch.cuda.max_memory_allocated()
            self.layer_peak = max(self.layer_peak, float(peak))
            transient = float(peak - torch.cuda.memory_allocated())
        for t in tree_leaves(out):
            if not isinstance(t, torch.Tensor):
                continue
            k = _key(t)
            if not k:
                continue
            act = self.by_key.get(k)
            if k in in_keys:  # a view or an in-place result: extends an activation's life
                if act is None or act.released is not None:
                    continue  # a view of a weight or of the input
            else:
                nbytes = int(t.untyped_storage().nbytes())
                name = str(getattr(func, "__name__", func)).split(".")[0]
                act = _Activation(len(self.acts), nbytes, name, self.layer, step, step, self.layer)
                act.transient = transient
                self.acts.append(act)
                self.by_key[k] = act
            self._track(t, act)
        return out

    def _track(self, t: torch.Tensor, act: _Activation) -> None:
        act.refs += 1
        owner = weakref.ref(self)

        def gone(_ref, act=act, rec=owner):
            act.refs -= 1
            r = rec()
            if act.refs == 0 and act.released is None and r is not None:
                act.released = r.step

        self.refs.append(weakref.ref(t, gone))

    def enter(self, position: int) -> None:
        self.layer = position
        if self.cuda:
            self.layer_peak = float(torch.cuda.memory_allocated())

    def leave(self, position: int, output) -> None:
        found, seen = [], set()
        for t in tree_leaves(output):
            if isinstance(t, torch.Tensor):
                act = self.by_key.get(_key(t))
                if act is not None and act.released is None and act.index not in seen:
                    seen.add(act.index)
                    found.append(act)
        self.layer_out[position] = found
        if self.cuda:
            self.layer_mem[position] = (
                float(torch.cuda.memory_allocated() - self.base),
                float(self.layer_peak - self.base),
            )


def _unique_bytes(tensors: Iterable[torch.Tensor]) -> int:
    seen, total = set(), 0
    for t in tensors:
        k = _key(t)
        if k and k not in seen:
            seen.add(k)
            total += int(t.untyped_storage().nbytes())
    return total


def trace_lifetimes(run, x: torch.Tensor, model: torch.nn.Module, *, device: str = "cpu"):
    """Run ``run(x)`` (one warmed-up forward of ``model``) under the recorder: (layer rows, tensor
    rows, model row)."""
    cuda = str(device).startswith("cuda") and torch.cuda.is_available()
    layer_list = memory_layers(model)
    weight_bytes = _unique_bytes([*model.parameters(), *model.buffers()])
    input_bytes = _unique_bytes([x])
    measured_peak = resident = math.nan
    if cuda:  # the untraced forward: what the allocator really needed
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        resident = float(torch.cuda.memory_allocated())
        out = run(x)
        torch.cuda.synchronize()
        measured_peak = float(torch.cuda.max_memory_allocated())
        del out
    rec = _Recorder(cuda)
    handles = []
    for ml in layer_list:
        p = ml.position
        handles.append(ml.module.register_forward_pre_hook(lambda m, a, p=p: rec.enter(p)))
        handles.append(ml.module.register_forward_hook(lambda m, a, o, p=p: rec.leave(p, o)))
    with hooked(handles):
        if cuda:
            torch.cuda.synchronize()
            rec.base = torch.cuda.memory_allocated()
        with rec:
            out = run(x)
        returned = {_key(t) for t in tree_leaves(out) if isinstance(t, torch.Tensor)}
    last = rec.step
    for act in rec.acts:
        if act.released is None or any(act is rec.by_key.get(k) for k in returned):
            act.released = last  # alive when the forward returned: the caller holds it
            if any(act is rec.by_key.get(k) for k in returned):
                act.last_use, act.last_use_layer = last, layer_list[-1].position
    tensor_rows = [_tensor_row(a, layer_list) for a in rec.acts]
    layer_rows = _layer_rows(rec, layer_list)
    model_row = {
        "level": "model",
        "index": 0,
        "layer": "",
        "module_type": type(model).__name__,
        "out_bytes": float(sum(a.nbytes for a in rec.acts)),
        "weight_bytes": float(weight_bytes),
        "input_bytes": float(input_bytes),
        "resident_bytes": resident,
        "measured_peak_bytes": measured_peak,
        "steps": float(last + 1),
    }
    del out
    return layer_rows, tensor_rows, model_row


def _layer_position(op_step: int, rec: _Recorder) -> int:
    return rec.op_layer[op_step] if 0 <= op_step < len(rec.op_layer) else -1


def _tensor_row(a: _Activation, layer_list: list[MemoryLayer]) -> dict:
    name = layer_list[a.layer].name if 0 <= a.layer < len(layer_list) else ""
    return {
        "level": "tensor",
        "index": a.index,
        "layer": name,
        "layer_index": a.layer,
        "module_type": a.op,
        "out_bytes": float(a.nbytes),
        "created_at_step": a.created,
        "freed_after_step": a.last_use,
        "held_until_step": a.released,
        "lifetime_steps": a.last_use - a.created,
        "last_use_layer": a.last_use_layer,
        "transient_bytes": a.transient,
    }


def _layer_rows(rec: _Recorder, layer_list: list[MemoryLayer]) -> list[dict]:
    rows = []
    for ml in layer_list:
        p = ml.position
        outs = rec.layer_out.get(p, [])
        freed = max([p, *(a.last_use_layer for a in outs)])
        held = max([p, *(_layer_position(a.released, rec) for a in outs)])
        alloc, peak = rec.layer_mem.get(p, (math.nan, math.nan))
        rows.append(
            {
                "level": "layer",
                "index": p,
                "layer": ml.name,
                "layer_index": p,
                "module_type": ml.module_type,
                "stage": ml.stage,
                "from_layers": ml.from_layers,
                "out_bytes": float(sum(a.nbytes for a in outs)),
                "created_at_step": p,
                "freed_after_step": freed,
                "held_until_step": held,
                "lifetime_steps": freed - p,
                "measured_allocated_bytes": alloc,
                "measured_peak_bytes": peak,
            }
        )
    for r in rows:  # what the layer outputs so far hold once layer p has run
        p, ran = r["index"], rows[: r["index"] + 1]
        r["live_bytes_after"] = float(sum(q["out_bytes"] for q in ran if q["freed_after_step"] > p))
        r["held_bytes_after"] = float(sum(q["out_bytes"] for q in ran if q["held_until_step"] > p))
    return rows


def _build(model: str, width: float) -> torch.nn.Module:
    name = str(model).lower()
    if name.startswith("resnet"):
        try:
            depth = int(name[6:] or 101)
        except ValueError:
            raise UserError(f"unknown model {model!r}: use resnet18/34/50/101/152") from None
        return resnet_backbone(depth)
    return build_yolo(name, float(width), calibrate=False)


def lifetime_rows(model="yolov8", width=1.0, *, batch=16, imgsz=640, precision="fp16",
                  layout="nhwc", device="cuda", warmup=2):  # fmt: skip
    """The ``memory_lifetimes`` rows of one model (a YOLO family at ``width``, or ``resnet101``),
    eager."""
    cfg = EngineConfig(backend="eager", precision=precision, layout=layout, batch=int(batch),
                       imgsz=int(imgsz), device=device, check=False)  # fmt: skip
    name = str(model).lower()
    engine = build_engine(_build(model, width), cfg)
    try:
        x = engine.make_input()
        for _ in range(int(warmup)):  # cuDNN's algorithm search allocates its trial workspaces
            engine(x)
        traced = trace_lifetimes(engine, x, engine.module, device=device)
    finally:
        engine.close()
    resnet = name.startswith("resnet")
    return lifetimes_frame(traced, model=name, family="resnet101" if resnet else name,
                           width=1.0 if resnet else float(width), batch=int(batch),
                           imgsz=int(imgsz), precision=cfg.precision.value,
                           layout=cfg.layout.value, device=str(device))  # fmt: skip


def lifetimes_frame(traced, **labels):
    """:func:`trace_lifetimes`' rows as a ``memory_lifetimes`` table with the model's ``labels`` on
    every row."""
    import pandas as pd

    layer_rows, tensor_rows, model_row = traced
    df = pd.DataFrame([model_row, *layer_rows, *tensor_rows]).assign(**labels)
    df = df.reindex(columns=list(COLUMNS))  # a column no row holds: NaN
    for c in ("layer", "module_type", "stage", "from_layers"):
        df[c] = df[c].fillna("").astype(str)
    for c in _INTS:
        df[c] = pd.to_numeric(df[c]).astype("Int64")
    return df


def lifetimes_table(models: Iterable[Mapping] = DEFAULT_LIFETIME_MODELS, **kwargs):
    """The ``memory_lifetimes`` table: :func:`lifetime_rows` for every model and width of
    ``models``."""
    import pandas as pd

    frames = []
    for spec in map(dict, models):
        widths = spec.get("widths", [1.0])
        for w in widths if isinstance(widths, (list, tuple)) else [widths]:
            frames.append(lifetime_rows(spec["model"], float(w), **kwargs))
            if str(kwargs.get("device", "cuda")).startswith("cuda") and torch.cuda.is_available():
                torch.cuda.empty_cache()
    return pd.concat(frames, ignore_index=True)


#: The allocator configurations compared: PyTorch's default (fixed-size segments, split and
#: cached) and expandable segments (one virtual range per stream that grows by mapping pages).
ALLOC_CONFS = ("default", "expandable_segments:True")

POOL_COLUMNS = (
    "alloc_conf", "step", "batch", "first_of_batch", "allocated_bytes", "reserved_bytes",
    "active_bytes", "inactive_split_bytes", "segments", "alloc_retries", "peak_allocated_bytes",
    "peak_reserved_bytes", "latency_ms", "model", "family", "width", "imgsz", "precision",
    "layout", "device", "seed", "cudnn_benchmark",
)  # fmt: skip

_STATS = {
    "allocated_bytes": "allocated_bytes.all.current",
    "reserved_bytes": "reserved_bytes.all.current",
    "active_bytes": "active_bytes.all.current",
    "inactive_split_bytes": "inactive_split_bytes.all.current",
    "segments": "segment.all.current",
    "alloc_retries": "num_alloc_retries",
    "peak_allocated_bytes": "allocated_bytes.all.peak",
    "peak_reserved_bytes": "reserved_bytes.all.peak",
}


def batch_sequence(forwards: int, batch_min: int, batch_max: int, seed: int = 0) -> list[int]:
    """``forwards`` batch sizes drawn uniformly in [``batch_min``, ``batch_max``], seeded."""
    if not 1 <= int(batch_min) <= int(batch_max):
        raise UserError(f"batch_min ({batch_min}) must be >= 1 and <= batch_max ({batch_max})")
    rng = random.Random(int(seed))
    return [rng.randint(int(batch_min), int(batch_max)) for _ in range(int(forwards))]


def pool_rows(*, model="yolov8", width=1.0, forwards=200, batch_min=1, batch_max=64, imgsz=640,
              precision="fp16", layout="nhwc", device="cuda", seed=0, cudnn_benchmark=False,
              alloc_conf="default"):  # fmt: skip
    """One row per forward of :func:`batch_sequence` in this process (``alloc_conf`` only labels the
    rows; CPU: latency only)."""
    import pandas as pd

    batches = batch_sequence(forwards, batch_min, batch_max, seed)
    cfg = EngineConfig(backend="eager", precision=precision, layout=layout, batch=int(batch_max),
                       imgsz=int(imgsz), device=device, cudnn_benchmark=bool(cudnn_benchmark),
                       check=False)  # fmt: skip
    cuda = str(device).startswith("cuda") and torch.cuda.is_available()
    engine = build_engine(build_yolo(model, float(width), calibrate=False), cfg)
    fmt = torch.channels_last if cfg.layout.value == "nhwc" else torch.contiguous_format
    gen = torch.Generator(device=device).manual_seed(int(seed))
    seen, rows = set(), []
    try:
        for step, b in enumerate(batches):
            shape = (b, 3, cfg.imgsz, cfg.imgsz)
            x = torch.empty(shape, dtype=DTYPES[cfg.precision], device=device, memory_format=fmt)
            x.uniform_(0, 1, generator=gen)
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()  # the peaks of this forward alone
            t0 = time.perf_counter()
            out = engine(x)
            if cuda:
                torch.cuda.synchronize()
            latency = (time.perf_counter() - t0) * 1e3
            del out, x
            stats = torch.cuda.memory_stats() if cuda else {}
            row = {k: float(stats[v]) if v in stats else math.nan for k, v in _STATS.items()}
            row.update(step=step, batch=b, first_of_batch=b not in seen, latency_ms=latency)
            seen.add(b)
            rows.append(row)
    finally:
        engine.close()
    df = pd.DataFrame(rows).assign(
        alloc_conf=str(alloc_conf), model=f"{model}:{float(width):g}", family=str(model),
        width=float(width), imgsz=cfg.imgsz, precision=cfg.precision.value,
        layout=cfg.layout.value, device=str(device), seed=int(seed),
        cudnn_benchmark=bool(cudnn_benchmark),
    )  # fmt: skip
    return df[list(POOL_COLUMNS)]


def child_main(argv: list[str] | None = None) -> None:
    """The child process of :func:`pool_table`: ``argv[0]`` is JSON of :func:`pool_rows`' keywords
    and ``out``."""
    args = json.loads((argv if argv is not None else sys.argv[1:])[0])
    out = args.pop("out")
    pool_rows(**args).to_parquet(out, index=False)


def pool_table(confs=ALLOC_CONFS, *, timeout_s: float = 300.0, **kwargs):
    """The ``memory_pool`` table: :func:`pool_rows` per allocator configuration, each in a fresh
    process."""
    import pandas as pd

    batch_sequence(  # bad sizes: one sentence here, not a child's traceback
        kwargs.get("forwards", 200), kwargs.get("batch_min", 1), kwargs.get("batch_max", 64)
    )
    frames = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, conf in enumerate(confs):
            out = Path(tmp) / f"pool_{i}.parquet"
            arg = json.dumps({**kwargs, "alloc_conf": conf, "out": str(out)})
            code = "from yolo_sm.topics.memory.collect import child_main; child_main()"
            try:
                done = subprocess.run(
                    [sys.executable, "-c", code, arg],
                    env=child_env(PYTORCH_CUDA_ALLOC_CONF=None if conf == "default" else conf),
                    capture_output=True,
                    text=True,
                    timeout=timeout_s,
                )
            except subprocess.TimeoutExpired:
                raise UserError(
                    f"the memory pool run with {conf} took over {timeout_s:.0f} s"
                ) from None
            if done.returncode or not out.exists():
                tail = (done.stderr or done.stdout or "").strip().splitlines()[-1:] or ["no output"]
                raise UserError(f"the memory pool run with {conf} failed: {tail[0]}")
            frames.append(pd.read_parquet(out))
    return pd.concat(frames, ignore_index=True)
