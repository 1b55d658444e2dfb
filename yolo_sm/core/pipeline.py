"""uint8 camera frames -> boxes on the device with ultralytics' tensor code and letterbox
geometry (boxes agree with ``YOLO.predict``); on a GPU ``streams`` batches in flight, optionally
one CUDA graph per slot after the copy."""

from __future__ import annotations

import copy
import functools
import time
from collections import deque
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from yolo_sm.contract.errors import UserError
from yolo_sm.core.images import load_images
from yolo_sm.core.nms import (
    batch_nms,
    cached_kernel,
    kernel_failed,
    nms_topk,
    topk_candidates,
    topk_size,
    triton_cdiv,
)
from yolo_sm.core.timing import cuda_graph


@dataclass(frozen=True)
class PipelineConfig:
    conf: float = 0.25  # score threshold
    iou: float = 0.7  # NMS IoU threshold (ultralytics' predict default)
    max_det: int = 300
    agnostic: bool = False
    streams: int = 2  # batches in flight on a GPU, each slot with its own copy stream
    nms_topk: int = 0  # > 0: NMS first on each image's nms_topk best candidates
    graph: bool = False  # GPU, nms_topk > 0: one CUDA graph of everything after the copy per slot


def letterbox_params(h: int, w: int, imgsz: int) -> tuple[float, int, int, int, int]:
    """(ratio, new_h, new_w, top, left) as ultralytics' LetterBox (centred, square)."""
    r = min(imgsz / h, imgsz / w)
    new_w, new_h = max(round(w * r), 1), max(round(h * r), 1)
    dw, dh = (imgsz - new_w) / 2, (imgsz - new_h) / 2
    return r, new_h, new_w, round(dh - 0.1), round(dw - 0.1)


def decode_head(raw, bins, anchors, strides, reg_max: int, nc: int) -> torch.Tensor:
    """Raw head output (B, 4*reg_max + nc, A) -> (B, 4 + nc, A) as ultralytics' Detect decodes
    it (DFL as a weighted sum, so torch.compile fuses it with the softmax)."""
    from ultralytics.utils.tal import dist2bbox

    raw = raw.float()
    box, cls = raw.split((4 * reg_max, nc), 1)
    if bins is not None:
        b, _, a = box.shape
        box = (box.view(b, 4, reg_max, a).softmax(2) * bins.view(1, 1, reg_max, 1)).sum(2)
    dbox = dist2bbox(box, anchors, xywh=True, dim=1) * strides
    return torch.cat((dbox, cls.sigmoid()), 1)


def decode_chosen(raw, bins, anchors, strides, reg_max: int, nc: int, conf: float, k: int):
    """:func:`decode_head` and each image's ``k`` best candidates, compiled together."""
    y = decode_head(raw, bins, anchors, strides, reg_max, nc)
    return y, topk_candidates(y, conf, k)


@functools.cache
def fused(fn):
    """``fn`` compiled by torch.compile (static shapes), once per process."""
    return torch.compile(fn, dynamic=False)


def letterbox_gpu(
    frames: torch.Tensor, imgsz: int, dtype: torch.dtype, channels_last: bool
) -> torch.Tensor:
    """(B, H, W, 3) uint8 BGR -> (B, 3, imgsz, imgsz) RGB in [0, 1], letterboxed."""
    b, h, w, _ = frames.shape
    _, new_h, new_w, top, left = letterbox_params(h, w, imgsz)
    x = frames.permute(0, 3, 1, 2).flip(1).float()
    if (new_h, new_w) != (h, w):
        x = F.interpolate(x, size=(new_h, new_w), mode="bilinear", align_corners=False)
        x = x.round_().clamp_(0, 255)  # OpenCV resizes uint8 to uint8
    out = torch.full((b, 3, imgsz, imgsz), 114.0, device=frames.device)
    out[:, :, top : top + new_h, left : left + new_w] = x
    out = out.div_(255).to(dtype)
    return out.contiguous(memory_format=torch.channels_last) if channels_last else out


def letterbox_kernel(
    frames: torch.Tensor, imgsz: int, dtype: torch.dtype, channels_last: bool
) -> torch.Tensor | None:
    """:func:`letterbox_gpu` in one Triton kernel writing ``dtype`` in the layout asked for once;
    None where the kernel cannot run."""
    kernel = cached_kernel(_LETTERBOX, _define_letterbox)
    if kernel is None:
        return None
    b, h, w, _ = frames.shape
    _, new_h, new_w, top, left = letterbox_params(h, w, imgsz)
    # allocated in its layout: .contiguous() would be a second pass over the output
    layout = torch.channels_last if channels_last else torch.contiguous_format
    out = torch.empty((b, 3, imgsz, imgsz), dtype=dtype, device=frames.device, memory_format=layout)
    block = 256
    try:
        kernel[(triton_cdiv(imgsz * imgsz, block), b)](
            frames.contiguous(), out, h, w, new_h, new_w, top, left, h / new_h, w / new_w,
            *out.stride(), imgsz, RESIZE=(new_h, new_w) != (h, w), BLOCK=block,
        )  # fmt: skip
    except Exception as e:  # noqa: BLE001 - a kernel that does not compile here
        kernel_failed(_LETTERBOX, "letterbox", e, "torch.compile's letterbox runs instead")
        return None
    return out


_LETTERBOX: dict = {}


def _define_letterbox(triton, tl):
    @triton.jit
    def _letterbox(src, out, H, W, new_h, new_w, top, left, scale_h, scale_w, sb, sc, sy, sx,
                   S, RESIZE: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
        b = tl.program_id(1)
        p = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        live = p < S * S
        oy, ox = p // S, p % S
        dy, dx = oy - top, ox - left
        inside = live & (dy >= 0) & (dy < new_h) & (dx >= 0) & (dx < new_w)
        if RESIZE:  # upsample_bilinear2d, align_corners=False
            fy = tl.maximum(scale_h * (dy.to(tl.float32) + 0.5) - 0.5, 0.0)
            fx = tl.maximum(scale_w * (dx.to(tl.float32) + 0.5) - 0.5, 0.0)
            y0, x0 = fy.to(tl.int32), fx.to(tl.int32)
            y1 = tl.where(y0 < H - 1, y0 + 1, y0)
            x1 = tl.where(x0 < W - 1, x0 + 1, x0)
            ly1, lx1 = fy - y0.to(tl.float32), fx - x0.to(tl.float32)
            ly0, lx0 = 1.0 - ly1, 1.0 - lx1
        else:
            y0, y1, x0, x1 = dy, dy, dx, dx
        base = b.to(tl.int64) * H * W * 3
        for c in tl.static_range(3):  # RGB out of BGR
            p00 = tl.load(src + base + (y0 * W + x0) * 3 + 2 - c, mask=inside, other=0)
            if RESIZE:
                p01 = tl.load(src + base + (y0 * W + x1) * 3 + 2 - c, mask=inside, other=0)
                p10 = tl.load(src + base + (y1 * W + x0) * 3 + 2 - c, mask=inside, other=0)
                p11 = tl.load(src + base + (y1 * W + x1) * 3 + 2 - c, mask=inside, other=0)
                v = ly0 * (lx0 * p00.to(tl.float32) + lx1 * p01.to(tl.float32)) + ly1 * (
                    lx0 * p10.to(tl.float32) + lx1 * p11.to(tl.float32)
                )
                r = tl.floor(v + 0.5)  # round half to even, as torch.round
                r = tl.where((r - v == 0.5) & (r % 2 == 1), r - 1.0, r)
                v = tl.minimum(tl.maximum(r, 0.0), 255.0)
            else:
                v = p00.to(tl.float32)
            v = tl.where(inside, v, 114.0) / 255.0
            at = b.to(tl.int64) * sb + c * sc + oy * sy + ox * sx
            tl.store(out + at, v.to(out.dtype.element_ty), mask=live)

    return _letterbox


class DetectionPipeline:
    """Frames to boxes around one engine of a YOLO model: ``pipeline(frames)`` returns one (n, 6)
    array per frame (x1, y1, x2, y2 in frame pixels, score, class)."""

    def __init__(self, model, engine, config: PipelineConfig | None = None):
        from ultralytics.utils.tal import make_anchors

        self.config = config or PipelineConfig()
        if self.config.streams < 1:
            raise UserError("a pipeline needs at least one stream")
        if self.config.graph and self.config.nms_topk < 1:
            raise UserError(
                "a pipeline in one CUDA graph needs the fixed-size NMS (nms_topk > 0): the full "
                "NMS's output size depends on the data"
            )
        if self.config.graph and getattr(engine, "capture", None) is None:
            raise UserError(
                f"engine {engine.description!r} cannot be captured in the pipeline's CUDA graph "
                "(it replays a graph of its own or runs outside torch); use an eager, cudagraph "
                "or compile engine of mode default or max-autotune-no-cudagraphs"
            )
        self.engine = engine
        self.imgsz = engine.config.imgsz
        self.device = torch.device(engine.config.device)
        self.head = model.det.model[-1]
        self.nc, self.reg_max = self.head.nc, self.head.reg_max
        feats = [
            torch.empty(1, 1, self.imgsz // int(s), self.imgsz // int(s)) for s in self.head.stride
        ]
        anchors, strides = make_anchors(feats, self.head.stride, 0.5)
        self.anchors = anchors.transpose(0, 1).unsqueeze(0).to(self.device)
        self.strides = strides.transpose(0, 1).to(self.device)
        conv = getattr(self.head.dfl, "conv", None)  # the DFL bins, where the head has them
        w = None if conv is None else conv.weight.detach().reshape(-1)
        self.bins = None if w is None else w.to(self.device, torch.float32, copy=True)
        self._on_gpu = self.device.type == "cuda"
        self.reset_counts()
        self._slots: dict[int, _Slot] = {}  # copy slots by index (GPU)
        self._compute = self._post = None  # compute and post-processing streams (GPU)

    def reset_counts(self) -> None:
        """Zero ``counts``: frames, candidates above the score threshold, boxes kept."""
        self.counts = {"frames": 0, "candidates": 0, "boxes": 0}

    def preprocess(self, frames_dev: torch.Tensor, compiled: bool = False) -> torch.Tensor:
        """:func:`letterbox_gpu` to the engine's size, dtype and layout (``compiled``: Triton's
        kernel or torch.compile's)."""
        args = (frames_dev, self.imgsz, self.engine.input_dtype)
        channels_last = self.engine.config.layout.value == "nhwc"
        if compiled and frames_dev.is_cuda:
            out = letterbox_kernel(*args, channels_last)
            if out is not None:
                return out
        return (fused(letterbox_gpu) if compiled else letterbox_gpu)(*args, channels_last)

    def decode(self, raw: torch.Tensor, compiled: bool = False) -> torch.Tensor:
        """Raw head output -> (B, 4 + nc, A): xywh in letterboxed pixels and class probabilities."""
        decode = fused(decode_head) if compiled else decode_head
        return decode(raw, self.bins, self.anchors, self.strides, self.reg_max, self.nc)

    def postprocess(self, y: torch.Tensor, shape: tuple[int, int]) -> list[torch.Tensor]:
        """Boxes per image on the host as ultralytics' NMS and ``scale_boxes`` give them."""
        if self.config.nms_topk > 0:  # None where an image is not exact
            out = self._unpack(_to_host(self._packed_topk(y, shape)))
            if out is not None:
                return out
        return self._postprocess_full(y, shape)

    def _postprocess_full(self, y: torch.Tensor, shape: tuple[int, int]) -> list[torch.Tensor]:
        from ultralytics.utils import ops

        c = self.config
        b = y.shape[0]
        scores, cls = y[:, 4:].max(1)  # (B, A): best class per anchor
        keep = scores > c.conf
        bi, ai = keep.nonzero(as_tuple=True)  # host sync: the candidate count
        self.counts["frames"] += b
        self.counts["candidates"] += len(bi)
        if len(bi) == 0:  # no candidate in the whole batch
            return [torch.zeros((0, 6), dtype=y.dtype) for _ in range(b)]
        boxes = ops.xywh2xyxy(y[bi, :4, ai])
        sc, cl = scores[bi, ai], cls[bi, ai]
        kept = batch_nms(boxes, sc, cl, bi, b, self.nc, c.iou, c.agnostic)
        # by image, score order kept; at most max_det per image
        kept = kept[torch.argsort(bi[kept], stable=True)]
        kb = bi[kept]
        rank = torch.arange(len(kept), device=kept.device) - torch.searchsorted(kb, kb)
        kept = kept[rank < c.max_det]
        # x1 y1 x2 y2 score class | image: one copy brings boxes and per-image counts
        dets = torch.cat(
            (boxes[kept], sc[kept, None], cl[kept, None].to(y.dtype), bi[kept, None].to(y.dtype)),
            1,
        )
        # elementwise per box: one call equals ultralytics' per-image calls
        ops.scale_boxes((self.imgsz, self.imgsz), dets[:, :4], shape)
        host = _to_host(dets)
        self.counts["boxes"] += len(host)
        counts = torch.bincount(host[:, 6].long(), minlength=b).tolist()
        return list(host[:, :6].contiguous().split(counts))

    def _packed_topk(self, y: torch.Tensor, shape: tuple[int, int], chosen=None) -> torch.Tensor:
        """The fixed-size NMS's device half: (B, max_det x 6 + 3), each image's scaled
        boxes, box count, exactness and candidate count."""
        from ultralytics.utils import ops

        c = self.config
        b = y.shape[0]
        dets, counts, exact, cand = nms_topk(
            y, c.conf, c.iou, c.max_det, c.nms_topk, c.agnostic, chosen
        )  # fmt: skip
        ops.scale_boxes((self.imgsz, self.imgsz), dets[..., :4], shape)  # in place, per box
        tail = torch.stack((counts, exact.to(counts.dtype), cand), 1).to(dets.dtype)
        return torch.cat((dets.reshape(b, -1), tail), 1)

    def _unpack(self, host: torch.Tensor) -> list | None:
        """Boxes per image from :meth:`_packed_topk`'s host rows, counted; None where not exact."""
        counts, exact, cand = host[:, -3:].long().T.tolist()
        if not all(exact):
            return None
        b = len(counts)
        self.counts["frames"] += b
        self.counts["candidates"] += sum(cand)
        self.counts["boxes"] += sum(counts)
        rows = host[:, :-3].reshape(b, self.config.max_det, 6)
        return [rows[i, :n].clone() for i, n in enumerate(counts)]

    def _device_batch(self, frames_dev: torch.Tensor):
        """A batch's device work after its copy, no host sync (what a slot's graph captures)."""
        shape = tuple(frames_dev.shape[1:3])
        with torch.no_grad():
            raw = self.engine.capture(self.preprocess(frames_dev, compiled=True))
            c = self.config
            k = topk_size(raw.shape[-1], c.nms_topk, c.max_det)
            args = (self.bins, self.anchors, self.strides, self.reg_max, self.nc, c.conf, k)
            y, chosen = fused(decode_chosen)(raw, *args)  # decode and candidates, compiled together
            return y, self._packed_topk(y, shape, chosen)

    def __call__(self, frames) -> list[np.ndarray]:
        return list(self.run([frames]))[0][1]

    def run(self, batches):
        """Yield ``(latency_s, [boxes per frame])`` per batch of (B, H, W, 3) uint8 BGR frames
        (kept unwritten until yielded); latency from submission to boxes on the host."""
        if not self._on_gpu:
            for frames in batches:
                frames = self._as_batch(frames)
                t0 = time.perf_counter()
                yield self._finish(self._submit_cpu(frames, t0))
            return
        k = self.config.streams
        compute, _ = self._streams()
        # work the caller queued before (e.g. the engine timed on its own stream) comes first
        caller = torch.cuda.current_stream(self.device)
        for stream in (compute, *(slot.stream for slot in self._slots.values())):
            stream.wait_stream(caller)
        pending: deque[_Batch] = deque()
        try:
            for i, frames in enumerate(batches):
                frames = self._as_batch(frames)
                t0 = time.perf_counter()
                pending.append(self._submit(self._slot(i % k), frames, t0))
                if len(pending) >= k:  # k batches in flight: finish the oldest
                    yield self._finish(pending.popleft())
            while pending:
                yield self._finish(pending.popleft())
        finally:
            # a caller that stops early leaves batches queued: whatever it runs next on its
            # stream (the engine, whose CUDA graph buffers they use) waits for them
            caller = torch.cuda.current_stream(self.device)
            caller.wait_stream(compute)
            for slot in self._slots.values():
                caller.wait_stream(slot.stream)

    @staticmethod
    def _as_batch(frames):
        if isinstance(frames, torch.Tensor):
            ok = frames.dtype == torch.uint8
        else:
            frames = np.stack(frames) if isinstance(frames, list | tuple) else frames
            frames = np.ascontiguousarray(frames)
            ok = frames.dtype == np.uint8
        if not ok or frames.ndim != 4 or frames.shape[-1] != 3:
            raise UserError("frames must be uint8 arrays or tensors of shape (B, H, W, 3) (BGR)")
        return frames

    def _submit_cpu(self, frames, t0) -> _Batch:
        if isinstance(frames, np.ndarray):
            frames = torch.from_numpy(frames if frames.flags.writeable else frames.copy())
        y = self.decode(self.engine(self.preprocess(frames.to(self.device))))
        return _Batch(t0, tuple(frames.shape[1:3]), y)

    def _submit(self, slot: _Slot, frames, t0) -> _Batch:
        """Queue a batch's copy, letterbox, engine and decode on the GPU."""
        src = self._source(slot, frames)
        if self.config.graph:
            return self._submit_graph(slot, frames, src, t0)
        compute, post = self._streams()
        with torch.cuda.stream(slot.stream):
            dev = src.to(self.device, non_blocking=True)
            slot.copied.record(slot.stream)
            x = self.preprocess(dev)  # allocated on the copy stream, read on the compute stream
            prepped = torch.cuda.Event()
            prepped.record(slot.stream)
        with torch.cuda.stream(compute):
            compute.wait_event(prepped)
            x.record_stream(compute)  # freed after submit returns: not reused before compute
            raw = self.engine(x)
            # a CUDA-graph engine's output is overwritten by its next replay: decode reads it
            # first because it is queued on the same stream. Keep it here.
            y = self.decode(raw)  # a new tensor (the engine's output is not kept)
            ready = torch.cuda.Event()
            ready.record(compute)
        y.record_stream(post)  # allocated on the compute stream, read on the post stream
        return _Batch(t0, tuple(frames.shape[1:3]), y, ready, src)

    def _submit_graph(self, slot: _Slot, frames, src, t0) -> _Batch:
        """Queue a batch in graph mode (captured on the slot's first batch)."""
        shape = tuple(frames.shape)
        if slot.shape != shape:
            slot.capture(self, src, shape)
        with torch.cuda.stream(slot.stream):
            slot.dev.copy_(src, non_blocking=True)
            slot.copied.record(slot.stream)
            slot.graph.replay()
            slot.host.copy_(slot.packed, non_blocking=True)
            slot.done.record(slot.stream)
        return _Batch(t0, tuple(shape[1:3]), slot.y, slot.done, src, slot)

    def _source(self, slot: _Slot, frames):
        """What the copy to the device reads: the caller's tensor or the slot's pinned buffer."""
        if isinstance(frames, torch.Tensor) and frames.is_cuda:
            # already on a device, made on the caller's stream: the copy stream reads it after
            # that stream's work, and the allocator keeps it until the copy stream is done
            slot.stream.wait_stream(torch.cuda.current_stream(frames.device))
            frames.record_stream(slot.stream)
            src = frames
        elif isinstance(frames, torch.Tensor) and frames.is_pinned():
            src = frames  # the camera's pinned buffer: copied to the device with no host copy
        else:  # pageable host memory: staged through the slot's pinned buffer
            src = slot.buffer(tuple(frames.shape))
            slot.copied.synchronize()  # the buffer's previous copy to the device has finished
            if isinstance(frames, torch.Tensor):
                src.copy_(frames)
            else:
                src.numpy()[...] = frames
        return src

    def _finish(self, batch: _Batch):
        if batch.slot is not None:  # whole-batch graph: the boxes are on their way
            batch.ready.synchronize()
            dets = self._unpack(batch.slot.host)
            if dets is None:  # not exact: the full NMS on the graph's decoded output
                with torch.cuda.stream(batch.slot.stream):
                    dets = self._postprocess_full(batch.y, batch.shape)
        elif batch.ready is None:
            dets = self.postprocess(batch.y, batch.shape)
        else:
            _, post = self._streams()
            with torch.cuda.stream(post):
                # this batch's decode only, not the later batches queued on the compute stream
                post.wait_event(batch.ready)
                dets = self.postprocess(batch.y, batch.shape)  # syncs on the post stream only
        return time.perf_counter() - batch.t0, [d.numpy() for d in dets]

    def _streams(self):
        """(compute stream, high-priority post-processing stream), made on first use."""
        if self._compute is None:
            self._compute = torch.cuda.Stream(self.device)
            # high priority: the host waits on NMS's small kernels, not on queued engine work
            self._post = torch.cuda.Stream(self.device, priority=-1)
        return self._compute, self._post

    def _slot(self, i: int) -> _Slot:
        if i not in self._slots:
            self._slots[i] = _Slot(self.device)
            # a slot made mid-run: its stream runs after the caller's earlier work too
            self._slots[i].stream.wait_stream(torch.cuda.current_stream(self.device))
        return self._slots[i]


@dataclass
class _Batch:
    """A submitted batch: what finishing it needs and what must live until then."""

    t0: float  # submission time (perf_counter)
    shape: tuple  # (H, W) of its frames
    y: torch.Tensor  # decoded head output (B, 4 + nc, A)
    ready: object = None  # torch.cuda.Event recorded after the decode (GPU)
    src: object = None  # host tensor the copy reads (the caller's pinned frames): kept alive
    slot: _Slot | None = None  # whole-batch graph mode: the slot whose graph ran it


class _Slot:
    """One copy slot (GPU): stream, pinned buffers, copy event and, in graph mode, its graph."""

    #: eager runs of a slot's batch before its capture (Triton and cuDNN choices, allocations)
    WARMUP = 2

    def __init__(self, device: torch.device):
        self.stream = torch.cuda.Stream(device)
        self.copied = torch.cuda.Event()
        self._buffers: dict = {}
        self.shape = None  # frame batch shape the graph was captured for
        self.graph = self.dev = self.y = self.packed = self.host = None
        self.done = torch.cuda.Event()

    def capture(self, pipe: DetectionPipeline, src: torch.Tensor, shape: tuple) -> None:
        """Capture ``pipe``'s device work of one batch on static frames of ``shape``."""
        self.done.synchronize()  # the previous graph's batches, if any, have finished
        self.graph = self.shape = None  # a capture that fails is retried by the next batch
        dev = torch.empty(shape, dtype=torch.uint8, device=pipe.device)
        self.stream.wait_stream(torch.cuda.current_stream(pipe.device))
        with torch.cuda.stream(self.stream):
            dev.copy_(src, non_blocking=True)
        batch = lambda: pipe._device_batch(dev)  # noqa: E731
        graph, (y, packed) = cuda_graph(batch, self.stream, pipe.device, self.WARMUP)
        self.graph, self.dev, self.y, self.packed, self.shape = graph, dev, y, packed, shape
        self.host = torch.empty(packed.shape, dtype=packed.dtype, pin_memory=True)

    def buffer(self, shape: tuple) -> torch.Tensor:
        if shape not in self._buffers:
            self._buffers[shape] = _pinned_empty(shape)
        return self._buffers[shape]


def _pinned_empty(shape: tuple) -> torch.Tensor:
    return torch.empty(shape, dtype=torch.uint8, pin_memory=True)


def _to_host(t: torch.Tensor) -> torch.Tensor:
    """``t`` on the host once the current stream's copy has landed."""
    host = t.to("cpu", non_blocking=True)
    if t.is_cuda:
        torch.cuda.current_stream(t.device).synchronize()  # the copy has landed
    return host


def set_class_prior(model, p: float, spread: float = 1.0) -> None:
    """Centre a random-weight detector's class logits on ``log(p / (1 - p))``, std ``spread``."""
    head = model.det.model[-1]
    logit = float(np.log(p / (1 - p)))
    captured = []
    hooks = [seq[-1].register_forward_hook(lambda m, i, o: captured.append(o)) for seq in head.cv3]

    with torch.no_grad():
        model(torch.from_numpy(load_images(None, 640)))
    for h in hooks:
        h.remove()
    for seq, out in zip(head.cv3, captured, strict=True):
        last = seq[-1]
        std = float((out - last.bias.view(1, -1, 1, 1)).std()) or 1.0
        with torch.no_grad():
            last.weight.mul_(spread / std)
            last.bias.fill_(logit)


def ultralytics_yolo(model):
    """ultralytics' ``YOLO`` around a copy of ``model``'s detector."""
    from ultralytics import YOLO

    det = copy.deepcopy(model.det)
    det.model[-1].training = False  # ultralytics decodes in its head
    yolo = YOLO("yolov8n.yaml", task="detect", verbose=False)
    yolo.model = det
    return yolo


def match_boxes(a: np.ndarray, b: np.ndarray, iou_min: float = 0.9) -> float:
    """Fraction of boxes of ``a`` with a same-class box in ``b`` at IoU >= ``iou_min``."""
    if len(a) == 0:
        return 1.0 if len(b) == 0 else 0.0
    from torchvision.ops import box_iou

    if len(b) == 0:
        return 0.0
    iou = box_iou(torch.as_tensor(a[:, :4]), torch.as_tensor(b[:, :4]))
    same = torch.as_tensor(a[:, 5])[:, None] == torch.as_tensor(b[:, 5])[None, :]
    return float(((iou >= iou_min) & same).any(1).float().mean())


def measure_pipeline(
    pipe: DetectionPipeline,
    frames: list[np.ndarray],
    batch: int,
    seconds: float = 2.0,
    pinned: bool = True,
) -> dict:
    """Frames per second and per-batch latency over ``seconds`` of back-to-back batches;
    ``pinned`` (GPU): the batch pinned once, as a camera's pinned ring delivers it."""
    if not frames or batch < 1:
        raise UserError("measure_pipeline needs frames and a positive batch size")
    stack = np.stack([frames[i % len(frames)] for i in range(batch)])
    pinned = bool(pinned) and pipe.device.type == "cuda"
    if pinned:
        stack = torch.from_numpy(stack).pin_memory()
    # every slot's buffers and streams exist before timing starts
    for _ in pipe.run([stack] * max(2, pipe.config.streams)):  # two warm-up batches at least
        pass
    pipe.reset_counts()
    lat, n, t0 = [], 0, time.perf_counter()

    def batches():
        while time.perf_counter() - t0 < seconds:
            yield stack

    for latency, _ in pipe.run(batches()):
        lat.append(latency)
        n += batch
    wall = time.perf_counter() - t0
    q = np.quantile(lat, [0.5, 0.99]) if lat else [float("nan")] * 2
    return {
        "frames": n,
        "batch": batch,
        "seconds": wall,
        "frames_per_s": n / wall,
        "latency_p50_ms": float(q[0]) * 1e3,
        "latency_p99_ms": float(q[1]) * 1e3,
        "streams": pipe.config.streams,
        "pinned": pinned,
        # NMS's work: candidates above the score threshold and boxes kept, per frame
        "candidates_per_frame": pipe.counts["candidates"] / max(pipe.counts["frames"], 1),
        "boxes_per_frame": pipe.counts["boxes"] / max(pipe.counts["frames"], 1),
    }
