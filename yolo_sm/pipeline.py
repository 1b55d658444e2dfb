"""End-to-end detection: uint8 camera frames -> boxes, with every step after the host copy on the
device: pinned host buffers, asynchronous host-to-device copies on their own CUDA streams,
letterbox + normalise on the GPU, the engine, box decode, NMS, and the copy back.

Pre- and post-processing reuse ultralytics' own definitions where they are tensor code (the
Detect head's DFL and anchors, ``non_max_suppression``, ``scale_boxes``); the letterbox is
re-implemented on the GPU (ultralytics' runs in OpenCV on the host) with the same geometry:
scale ratio, rounding, centred padding of grey 114. Results agree with ``YOLO.predict`` on the
same weights to resampling noise (bilinear on the GPU vs OpenCV's fixed-point INTER_LINEAR).

Overlap: with ``streams`` > 1 on a GPU, batch *i+1* is copied and pre-processed on its own
stream while batch *i* computes; each slot's pinned buffer is reused only after its event says
the copy finished. NMS synchronises once per batch (its output size is data-dependent).
"""

from __future__ import annotations

import contextlib
import copy
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from yolo_sm.errors import UserError

# which NMS implementation DetectionPipeline.postprocess runs (recorded in the bench's rows):
# one torchvision nms over float64-offset (image, class) groups
NMS_IMPL = "nms_f64_offsets"


@dataclass(frozen=True)
class PipelineConfig:
    conf: float = 0.25  # score threshold
    iou: float = 0.7  # NMS IoU threshold (ultralytics' predict default)
    max_det: int = 300
    agnostic: bool = False
    streams: int = 2  # copy/pre-process slots in flight (GPU)


def letterbox_params(h: int, w: int, imgsz: int) -> tuple[float, int, int, int, int]:
    """(ratio, new_h, new_w, top, left) exactly as ultralytics' LetterBox (centred, square)."""
    r = min(imgsz / h, imgsz / w)
    new_w, new_h = max(round(w * r), 1), max(round(h * r), 1)
    dw, dh = (imgsz - new_w) / 2, (imgsz - new_h) / 2
    return r, new_h, new_w, round(dh - 0.1), round(dw - 0.1)


def letterbox_gpu(
    frames: torch.Tensor, imgsz: int, dtype: torch.dtype, channels_last: bool
) -> torch.Tensor:
    """(B, H, W, 3) uint8 BGR on any device -> (B, 3, imgsz, imgsz) RGB in [0, 1], letterboxed."""
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


class DetectionPipeline:
    """Frames to boxes around one engine built from a :class:`yolo_sm.models.YoloForward`
    (raw head output). ``pipeline(frames)`` returns one (n, 6) float array per frame:
    x1, y1, x2, y2 in frame pixels, score, class."""

    def __init__(self, model, engine, config: PipelineConfig | None = None):
        from ultralytics.utils.tal import make_anchors

        self.config = config or PipelineConfig()
        if self.config.streams < 1:
            raise UserError("a pipeline needs at least one stream")
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
        # a copy: moving the head's own DFL would move part of the caller's model
        self.dfl = copy.deepcopy(self.head.dfl).to(self.device).float()
        self._slots: dict = {}

    # -- stages ------------------------------------------------------------------------------
    def preprocess(self, frames_dev: torch.Tensor) -> torch.Tensor:
        cfg = self.engine.config
        return letterbox_gpu(
            frames_dev,
            self.imgsz,
            self.engine.input_dtype,
            channels_last=cfg.layout.value == "nhwc",
        )

    def decode(self, raw: torch.Tensor) -> torch.Tensor:
        """Raw head output (B, 4*reg_max + nc, A) -> ultralytics' (B, 4 + nc, A): xywh in
        letterboxed pixels and class probabilities."""
        from ultralytics.utils.tal import dist2bbox

        raw = raw.float()
        box, cls = raw.split((4 * self.reg_max, self.nc), 1)
        dbox = dist2bbox(self.dfl(box), self.anchors, xywh=True, dim=1) * self.strides
        return torch.cat((dbox, cls.sigmoid()), 1)

    def postprocess(self, y: torch.Tensor, shape: tuple[int, int]) -> list[torch.Tensor]:
        """Boxes per image, as ultralytics' ``non_max_suppression`` (best class per anchor, score
        threshold, class-aware NMS, ``max_det`` per image) then ``scale_boxes`` to the frame,
        but for the whole batch at once: one candidate gather, one ``torchvision`` batched NMS
        over every image and class, one sort. ultralytics loops over the images in Python (a
        dozen small kernels and several host syncs per image) and, where torchvision was not
        imported before, falls back to an iterative NMS in Python: at batch 64 with ~2,500
        candidates per image that took 2.3 s per batch on the H200 (measured).

        The (image, class) groups are separated by offsetting each group's boxes by a multiple
        of the boxes' span, in float64, and one ``torchvision.ops.nms`` runs on all of them.
        ``torchvision.ops.batched_nms`` does the same below 20,000 box coordinates on a GPU but
        above it loops over the groups in Python (one NMS per image and class): at batch 16
        that was ~640 NMS calls, 24.5 ms per batch of v8s on the H200 (measured). float64, since
        offsets of thousands of groups in fp32 would round the coordinates."""
        from torchvision.ops import nms
        from ultralytics.utils import ops

        c = self.config
        b = y.shape[0]
        scores, cls = y[:, 4:].max(1)  # (B, A): best class per anchor
        keep = scores > c.conf
        bi, ai = keep.nonzero(as_tuple=True)  # the one host sync for the candidates
        boxes = ops.xywh2xyxy(y[bi, :4, ai])
        sc, cl = scores[bi, ai], cls[bi, ai]
        # NMS groups: one per (image, class), or per image when class-agnostic
        group = bi if c.agnostic else bi * self.nc + cl
        if len(bi) == 0:  # no candidate in the whole batch
            return [y.new_zeros((0, 6)) for _ in range(b)]
        shifted = boxes.double() - boxes.min().double()
        shifted = shifted + (group.double() * (shifted.max() + 1))[:, None]
        kept = nms(shifted, sc.double(), c.iou)  # indices sorted by decreasing score
        kept = kept[torch.argsort(bi[kept], stable=True)]  # by image, score order kept
        kb = bi[kept]
        rank = torch.arange(len(kept), device=y.device) - torch.searchsorted(kb, kb)
        kept = kept[rank < c.max_det]
        dets = torch.cat((boxes[kept], sc[kept, None], cl[kept, None].float()), 1)
        counts = torch.bincount(bi[kept], minlength=b).tolist()
        out = list(dets.split(counts))
        for d in out:
            d[:, :4] = ops.scale_boxes((self.imgsz, self.imgsz), d[:, :4], shape)
        return out

    # -- running -----------------------------------------------------------------------------
    def __call__(self, frames) -> list[np.ndarray]:
        return list(self.run([frames]))[0][1]

    def run(self, batches):
        """Yield ``(latency_s, [boxes per frame])`` for each batch of frames (a (B, H, W, 3)
        uint8 array or a list of equally sized frames), overlapping the copy and pre-processing
        of the next batch with the current one on a GPU."""
        on_gpu = self.device.type == "cuda"
        k = self.config.streams if on_gpu else 1
        pending = []  # (t0, slot, x, shape) submitted, not yet post-processed
        for i, frames in enumerate(batches):
            arr = np.ascontiguousarray(np.stack(frames) if isinstance(frames, list) else frames)
            if arr.dtype != np.uint8 or arr.ndim != 4 or arr.shape[-1] != 3:
                raise UserError("frames must be uint8 arrays of shape (B, H, W, 3) (BGR)")
            t0 = time.perf_counter()
            slot = self._slot(i % k, arr.shape, on_gpu)
            if on_gpu:
                slot["done"].synchronize()  # the pinned buffer's last copy has finished
            slot["host"].numpy()[...] = arr
            with torch.cuda.stream(slot["stream"]) if on_gpu else contextlib.nullcontext():
                dev = slot["host"].to(self.device, non_blocking=True)
                x = self.preprocess(dev)
                if on_gpu:
                    slot["done"].record()
            pending.append((t0, slot, x, arr.shape[1:3]))
            if len(pending) >= k:
                yield self._finish(*pending.pop(0), on_gpu)
        while pending:
            yield self._finish(*pending.pop(0), on_gpu)

    def _finish(self, t0, slot, x, shape, on_gpu):
        if on_gpu:
            torch.cuda.current_stream().wait_stream(slot["stream"])
        raw = self.engine(x)
        dets = self.postprocess(self.decode(raw), tuple(shape))
        out = [d.cpu().numpy() for d in dets]  # waits for the device
        return time.perf_counter() - t0, out

    def _slot(self, i, shape, on_gpu):
        key = (i, tuple(shape))
        if key not in self._slots:
            host = torch.empty(shape, dtype=torch.uint8, pin_memory=on_gpu)
            self._slots[key] = {
                "host": host,
                "stream": torch.cuda.Stream(self.device) if on_gpu else None,
                "done": torch.cuda.Event() if on_gpu else None,
            }
        return self._slots[key]


def set_class_prior(model, p: float, spread: float = 1.0) -> None:
    """Make a random-weight detector's class scores look like a trained one's: logits centred
    on ``log(p / (1 - p))`` with standard deviation ``spread`` on the bundled photos. ultralytics'
    init leaves every score near 1e-5 (nothing passes a threshold) and calibrated features
    saturate it at 1 (every box ties): either makes NMS and box comparisons vacuous. For
    pipeline studies only; it rescales the last class conv of each level."""
    head = model.det.model[-1]
    logit = float(np.log(p / (1 - p)))
    captured = []
    hooks = [seq[-1].register_forward_hook(lambda m, i, o: captured.append(o)) for seq in head.cv3]
    from yolo_sm.images import load_images

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


def ultralytics_predict(
    model,
    frames: list[np.ndarray],
    batch: int,
    device: str,
    half: bool,
    conf: float = 0.25,
    iou: float = 0.7,
    imgsz: int = 640,
):
    """Boxes from ultralytics' own ``YOLO.predict`` on the same weights (its pre- and
    post-processing), for comparison: one (n, 6) array per frame. ``rect=False``: by default
    predict letterboxes to the smallest stride multiple (640x480 for a portrait photo), while an
    engine built for one shape, like ours, takes the full square."""

    from ultralytics import YOLO

    det = copy.deepcopy(model.det)
    det.model[-1].training = False  # ultralytics decodes in its head
    yolo = YOLO("yolov8n.yaml", task="detect", verbose=False)
    yolo.model = det
    out = []
    for i in range(0, len(frames), batch):
        res = yolo.predict(
            frames[i : i + batch],
            imgsz=imgsz,
            device=device,
            half=half,
            conf=conf,
            iou=iou,
            rect=False,
            verbose=False,
        )
        out += [r.boxes.data.cpu().numpy() for r in res]
    return out


def match_boxes(a: np.ndarray, b: np.ndarray, iou_min: float = 0.9) -> float:
    """Fraction of boxes of ``a`` with a same-class box in ``b`` at IoU >= ``iou_min``."""
    if len(a) == 0:
        return 1.0 if len(b) == 0 else 0.0
    from torchvision.ops import box_iou

    iou = box_iou(torch.as_tensor(a[:, :4]), torch.as_tensor(b[:, :4])) if len(b) else None
    if iou is None:
        return 0.0
    same = torch.as_tensor(a[:, 5])[:, None] == torch.as_tensor(b[:, 5])[None, :]
    return float(((iou >= iou_min) & same).any(1).float().mean())


def measure_pipeline(
    pipe: DetectionPipeline,
    frames: list[np.ndarray],
    batch: int,
    seconds: float = 2.0,
    warmup_batches: int = 2,
) -> dict:
    """Frames per second and per-batch latency (submission of its frames to boxes on the host,
    so queueing behind the batch in flight is included) over ``seconds`` of back-to-back
    batches cycling through ``frames`` (all the same size)."""
    if not frames or batch < 1:
        raise UserError("measure_pipeline needs frames and a positive batch size")
    stack = np.stack([frames[i % len(frames)] for i in range(batch)])
    for _ in pipe.run([stack] * warmup_batches):
        pass
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
    }
