"""End-to-end detection: uint8 camera frames -> boxes, with every step after the host copy on the
device: pinned host buffers, asynchronous host-to-device copies on their own CUDA streams,
letterbox + normalise on the GPU, the engine, box decode, NMS, and one copy back per batch.

Pre- and post-processing reuse ultralytics' own definitions where they are tensor code (the
Detect head's DFL and anchors, ``non_max_suppression``, ``scale_boxes``); the letterbox is
re-implemented on the GPU (ultralytics' runs in OpenCV on the host) with the same geometry:
scale ratio, rounding, centred padding of grey 114. Results agree with ``YOLO.predict`` on the
same weights to resampling noise (bilinear on the GPU vs OpenCV's fixed-point INTER_LINEAR).

Overlap (GPU): ``run`` keeps up to ``streams`` batches in flight. Submitting a batch only queues
work: on its slot's copy stream (slot = batch index mod ``streams``) the host-to-device copy
(straight from the caller's pinned tensor; a numpy array is first copied into the slot's pinned
buffer, once that buffer's previous copy has finished) and the letterbox; on the one compute
stream, after an event of that copy, the engine and the box decode, then an event ``ready``.
Once ``streams`` batches are in flight the oldest is finished on a high-priority post-processing
stream that waits on that batch's ``ready`` event only: NMS's host syncs (its output size is
data-dependent) and the one device-to-host copy of the boxes wait for that batch, while the
engine runs the later batches already queued on the compute stream. With ``streams`` = 1 each
batch is finished before the next is submitted (no overlap). On a CPU the stages run in order,
one batch at a time, whatever ``streams`` says.
"""

from __future__ import annotations

import copy
import time
from collections import deque
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from yolo_sm.collect.images import load_images
from yolo_sm.contract.errors import UserError

# which NMS implementation DetectionPipeline.postprocess runs (recorded in the bench's rows):
# nms_matrix (every image and class at once, a fixed point over an overlap matrix; torchvision's
# nms in chunks of whole images beyond NMS_MATRIX_LIMIT)
NMS_IMPL = "nms_matrix_fixpoint"
# most candidates one NMS call takes (whole images; an image with more is a call of its own):
# a call costs ~n^2 (postprocess), a call ~0.1 ms of launches and a host sync
NMS_CHUNK = 2048
# postprocess runs nms_matrix (no serial walk) while batch x (most candidates of an image)^2 is
# at most this many overlap bits, else torchvision's nms in chunks; NMS_IOU_CHUNK bounds the
# float64 IoU temporaries of one pass (elements)
NMS_MATRIX_LIMIT = 1 << 31
NMS_IOU_CHUNK = 1 << 25


def nms_chunks(counts: list[int], limit: int) -> list[tuple[int, int]]:
    """[lo, hi) candidate ranges of consecutive whole images, each at most ``limit`` candidates
    unless one image alone has more; images with none are skipped."""
    out, lo, hi = [], 0, 0
    for n in counts:
        if n and hi > lo and hi - lo + n > limit:
            out.append((lo, hi))
            lo = hi
        hi += n
    if hi > lo:
        out.append((lo, hi))
    return out


def nms_layout(bi, cls, b: int, nc: int, agnostic: bool) -> tuple:
    """How :func:`nms_matrix` lays the candidates out, from one host sync: ``(key, groups,
    width, same_class)``. Boxes only suppress boxes of their own (image, class) group (or image,
    ``agnostic``), so the overlap matrices are per group: with ``key`` = image * nc + class
    there are ``b * nc`` groups of at most ``width`` candidates (the largest group). When one
    class dominates an image that is wasteful (``b * nc * width^2`` > ``b * most^2``, ``most``
    the largest image), and the groups are the images, with a same-class test (``same_class``).
    """
    per_image = torch.bincount(bi, minlength=b)
    if agnostic:
        return bi, b, int(per_image.max()), False
    key = bi * nc + cls
    per_group = torch.bincount(key, minlength=b * nc)
    most, width = (int(v) for v in torch.stack((per_image.max(), per_group.max())).tolist())
    if b * nc * width * width <= b * most * most:
        return key, b * nc, width, False
    return bi, b, most, True


def overlap_matrix(bx, cls, valid, iou: float) -> torch.Tensor:
    """``S[g, j, i]``: box j comes before box i in its group's row (outscores it), both are real
    (``valid``), they share a class (where ``cls`` is given) and their IoU exceeds ``iou``.
    ``bx`` is (groups, width, 4) xyxy; IoU in fp32 as torchvision computes it (intersection over
    area_a + area_b - intersection, correctly rounded division). On a GPU one Triton kernel
    writes S in one pass (a byte per pair); elsewhere torch ops, in passes of at most
    :data:`NMS_IOU_CHUNK` pairs."""
    groups, width = valid.shape
    bx = bx.float().contiguous()
    kernel = _triton_overlap() if bx.is_cuda or _triton_interpret() else None
    if kernel is not None:
        S = torch.empty((groups, width, width), dtype=torch.uint8, device=bx.device)
        c = cls.contiguous() if cls is not None else valid  # unused when SAME_CLASS is off
        block = 32
        grid = (groups, triton_cdiv(width, block), triton_cdiv(width, block))
        try:
            kernel[grid](
                bx, c, valid.to(torch.uint8).contiguous(), S, width, float(iou),
                SAME_CLASS=cls is not None, BLOCK=block,
            )  # fmt: skip
            return S.view(torch.bool)
        except Exception as e:  # noqa: BLE001 - a kernel that does not compile here
            _kernel_failed(_TRITON_OVERLAP, "overlap", e)
    x1, y1, x2, y2 = bx.unbind(-1)
    area = (x2 - x1) * (y2 - y1)
    later = torch.ones(width, width, dtype=torch.bool, device=bx.device).triu(1)  # j before i
    S = torch.empty((groups, width, width), dtype=torch.bool, device=bx.device)
    step = max(1, NMS_IOU_CHUNK // max(width * width, 1))  # groups per pass (memory)
    for lo in range(0, groups, step):
        g = slice(lo, lo + step)

        def pair(t, fn, g=g):
            return fn(t[g][:, :, None], t[g][:, None, :])

        w = (pair(x2, torch.minimum) - pair(x1, torch.maximum)).clamp_(min=0)
        inter = w.mul_((pair(y2, torch.minimum) - pair(y1, torch.maximum)).clamp_(min=0))
        over = inter / (area[g][:, :, None] + area[g][:, None, :] - inter) > iou
        if cls is not None:
            over &= cls[g][:, :, None] == cls[g][:, None, :]
        S[g] = over & later & valid[g][:, :, None]
    return S


def triton_cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def _triton_interpret() -> bool:
    """Triton's interpreter (``TRITON_INTERPRET=1``) runs its kernels on CPU tensors: the CPU
    tests check the GPU kernel's logic that way."""
    import os

    return os.environ.get("TRITON_INTERPRET") == "1"


_TRITON_OVERLAP: dict = {}


def _cached_kernel(cache: dict, define):
    """``define(triton, tl)``'s kernel, made once per interpreter mode and kept in ``cache``;
    None where Triton is missing or the definition fails (the caller then uses torch ops)."""
    mode = _triton_interpret()
    if mode not in cache:
        try:
            import triton
            import triton.language as tl

            cache[mode] = define(triton, tl)
        except Exception:  # noqa: BLE001 - no Triton: torch ops do the same in more passes
            cache[mode] = None
    return cache[mode]


def _kernel_failed(cache: dict, what: str, e: Exception) -> None:
    """A cached kernel failed at launch (e.g. does not compile for this GPU): warn once and
    drop it, so later calls use the torch ops."""
    import warnings

    warnings.warn(
        f"the Triton {what} kernel failed ({type(e).__name__}: {e}); NMS uses torch ops from "
        "now on (same result, more passes)",
        stacklevel=3,
    )
    cache[_triton_interpret()] = None


def _triton_overlap():
    """The Triton kernel behind :func:`overlap_matrix` (one per interpreter mode), or None."""
    return _cached_kernel(_TRITON_OVERLAP, _define_overlap)


def _define_overlap(triton, tl):
    @triton.jit
    def _overlap(bx, cls, valid, out, width, iou, SAME_CLASS: tl.constexpr, BLOCK: tl.constexpr):
        g = tl.program_id(0)
        j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)  # suppressor (row)
        i = tl.program_id(2) * BLOCK + tl.arange(0, BLOCK)  # suppressed (column)
        mj, mi = j < width, i < width
        bj, bi = (g * width + j) * 4, (g * width + i) * 4
        xj1 = tl.load(bx + bj, mask=mj, other=0.0)
        yj1 = tl.load(bx + bj + 1, mask=mj, other=0.0)
        xj2 = tl.load(bx + bj + 2, mask=mj, other=0.0)
        yj2 = tl.load(bx + bj + 3, mask=mj, other=0.0)
        xi1 = tl.load(bx + bi, mask=mi, other=0.0)
        yi1 = tl.load(bx + bi + 1, mask=mi, other=0.0)
        xi2 = tl.load(bx + bi + 2, mask=mi, other=0.0)
        yi2 = tl.load(bx + bi + 3, mask=mi, other=0.0)
        w = tl.minimum(xj2[:, None], xi2[None, :]) - tl.maximum(xj1[:, None], xi1[None, :])
        h = tl.minimum(yj2[:, None], yi2[None, :]) - tl.maximum(yj1[:, None], yi1[None, :])
        inter = tl.maximum(w, 0.0) * tl.maximum(h, 0.0)
        area_j = (xj2 - xj1) * (yj2 - yj1)
        area_i = (xi2 - xi1) * (yi2 - yi1)
        union = area_j[:, None] + area_i[None, :] - inter
        over = tl.math.div_rn(inter, union) > iou
        vj = tl.load(valid + g * width + j, mask=mj, other=0) != 0
        over = over & (j[:, None] < i[None, :]) & vj[:, None]
        if SAME_CLASS:
            cj = tl.load(cls + g * width + j, mask=mj, other=-1)
            ci = tl.load(cls + g * width + i, mask=mi, other=-2)
            over = over & (cj[:, None] == ci[None, :])
        ptr = out + (g * width + j[:, None]) * width + i[None, :]
        tl.store(ptr, over.to(tl.uint8), mask=mj[:, None] & mi[None, :])

    return _overlap


def nms_matrix(boxes, scores, cls, key, groups, width, iou, same_class=False):
    """Greedy NMS of every group (image and class) of a batch at once, with no serial walk.

    The candidates are laid out as a (groups, width) matrix, each row one group (``key``, from
    :func:`nms_layout`) sorted by decreasing score; ``S[g, j, i]`` says that box j outscores box
    i in its group (and has its class, ``same_class``) and overlaps it above ``iou`` (IoU in
    fp32, torchvision's formula). Greedy NMS keeps box i iff no kept box j suppresses it: a
    recursion with one solution. Iterating ``keep = not any_j(keep_j and S_ji)`` from all-kept
    settles every box whose chain of suppressors is at most t long after t steps, and a step
    that changes nothing has reached that solution (on the bundled photos: 6-10 steps). Each
    step is one pass over S (:func:`suppress_fixpoint`: on a GPU one Triton kernel over its
    upper triangle, a host sync every :data:`FIXPOINT_ROUND` steps to test for the fixed
    point). Returns the kept candidate indices in decreasing score order (ties: candidate
    order): what ``torchvision.ops.nms`` returns for each group, which the CPU tests check
    against ultralytics.

    Why not ``torchvision.ops.nms``: its CUDA kernel walks its n x n mask in one thread block,
    ~n^2 serial work per call (one call over a batch of 16 with 40,656 candidates: 39 ms on the
    H200; one call per image: 9.8 ms a batch, tools/pipeline_probe.py)."""
    dev, n = boxes.device, len(scores)
    # by group, then decreasing score (two stable sorts)
    order = torch.sort(scores, descending=True, stable=True).indices
    order = order[torch.sort(key[order], stable=True).indices]
    k = key[order]
    counts = torch.bincount(k, minlength=groups)
    pos = torch.arange(n, device=dev) - (torch.cumsum(counts, 0) - counts)[k]
    idx = torch.full((groups, width), -1, device=dev, dtype=torch.long)
    idx[k, pos] = order
    valid = idx >= 0
    safe = idx.clamp(min=0)
    bx = boxes.float()[safe]  # (groups, width, 4)
    S = overlap_matrix(bx, cls[safe] if same_class else None, valid, iou)
    kept = idx[suppress_fixpoint(S, valid)]
    return kept[torch.sort(scores[kept], descending=True, stable=True).indices]


# fixed-point steps launched between two host checks for convergence (suppress_fixpoint)
FIXPOINT_ROUND = 4


def suppress_fixpoint(S: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """The fixed point of ``keep = valid and not any_j(keep_j and S[:, j, i])`` from all-kept
    (:func:`nms_matrix`): greedy NMS's kept boxes, as a (groups, width) bool mask.

    On a GPU each step is one Triton kernel (:func:`_triton_suppress`) that reads only the upper
    triangle of S (j < i) and counts the boxes whose state changed; steps are launched in rounds
    of :data:`FIXPOINT_ROUND` with one host sync per round (a step after the fixed point
    changes nothing, so overshooting is harmless). Elsewhere torch ops, one sync per step. The
    torch ops' step ``S & keep`` then ``any`` writes and reads a groups x width^2 temporary:
    on the H200 at batch 16 (40,624 candidates, 104 MB of S) 0.24 + 0.07 ms a step and a sync,
    3.5 ms of a 7.8 ms postprocess (tools/pipeline_probe.py)."""
    groups, width = valid.shape
    kernel = _triton_suppress() if S.is_cuda or _triton_interpret() else None
    if kernel is not None and groups and width:
        s8, v8 = S.view(torch.uint8).contiguous(), valid.to(torch.uint8).contiguous()
        bufs = [v8.clone(), torch.empty_like(v8)]
        changed = torch.zeros(width + FIXPOINT_ROUND + 1, dtype=torch.int32, device=S.device)
        block = 64
        grid = (groups, triton_cdiv(width, block))
        try:
            step = 0
            # a chain of suppressors is at most width long: width + 1 steps reach the point
            while step <= width:
                for _ in range(FIXPOINT_ROUND):
                    kernel[grid](
                        s8, bufs[step % 2], v8, bufs[(step + 1) % 2], changed[step:], width,
                        BJ=block, BI=block,
                    )  # fmt: skip
                    step += 1
                if int(changed[step - 1]) == 0:  # host sync: the last step changed nothing
                    return bufs[step % 2].view(torch.bool)
        except Exception as e:  # noqa: BLE001 - a kernel that does not compile here
            _kernel_failed(_TRITON_SUPPRESS, "suppression", e)
    keep = valid
    while True:
        new = valid & ~(S & keep[:, :, None]).any(1)
        if torch.equal(new, keep):
            return keep
        keep = new


_TRITON_SUPPRESS: dict = {}


def _triton_suppress():
    """The Triton kernel of one :func:`suppress_fixpoint` step (one per interpreter mode), or
    None. Program (g, column block): for its columns i, OR over rows j < i of S[g, j, i] and
    keep[g, j] (tiles of S read row by row, coalesced along i), then keep_out = valid and not
    suppressed, and the count of changed boxes added to ``changed[0]``."""
    return _cached_kernel(_TRITON_SUPPRESS, _define_suppress)


def _define_suppress(triton, tl):
    @triton.jit
    def _suppress(S, keep_in, valid, keep_out, changed, width, BJ: tl.constexpr, BI: tl.constexpr):
        g = tl.program_id(0)
        i = tl.program_id(1) * BI + tl.arange(0, BI)
        mi = i < width
        hit = tl.zeros([BI], dtype=tl.int32)
        end = tl.minimum(width, (tl.program_id(1) + 1) * BI)  # rows j < i only
        for j0 in range(0, end, BJ):
            j = j0 + tl.arange(0, BJ)
            mj = j < width
            kj = tl.load(keep_in + g * width + j, mask=mj, other=0).to(tl.int32)
            ptr = S + (g * width + j[:, None]) * width + i[None, :]
            s = tl.load(ptr, mask=mj[:, None] & mi[None, :], other=0).to(tl.int32)
            hit = tl.maximum(hit, tl.max(s * kj[:, None], axis=0))
        v = tl.load(valid + g * width + i, mask=mi, other=0).to(tl.int32)
        old = tl.load(keep_in + g * width + i, mask=mi, other=0).to(tl.int32)
        new = v * (1 - hit)
        tl.store(keep_out + g * width + i, new.to(tl.uint8), mask=mi)
        diff = tl.sum(tl.where(mi & (new != old), 1, 0), axis=0)
        tl.atomic_add(changed, diff)

    return _suppress


@dataclass(frozen=True)
class PipelineConfig:
    conf: float = 0.25  # score threshold
    iou: float = 0.7  # NMS IoU threshold (ultralytics' predict default)
    max_det: int = 300
    agnostic: bool = False
    streams: int = 2  # batches in flight on a GPU, each slot with its own copy stream; 1: none


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
    """Frames to boxes around one engine built from a :class:`yolo_sm.collect.models.YoloForward`
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
        self._on_gpu = self.device.type == "cuda"
        self.reset_counts()
        self._slots: dict[int, _Slot] = {}  # copy slots by index (GPU)
        self._compute = self._post = None  # compute and post-processing streams (GPU)

    def reset_counts(self) -> None:
        """Zero ``counts``, the work NMS saw since: frames, candidates above the score threshold
        (what NMS costs grows with), boxes kept."""
        self.counts = {"frames": 0, "candidates": 0, "boxes": 0}

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
        """Boxes per image on the host, as ultralytics' ``non_max_suppression`` (best class per
        anchor, score threshold, class-aware NMS, ``max_det`` per image) then ``scale_boxes`` to
        the frame, batched: one candidate gather, NMS in a few calls that each cover whole
        images, one ``scale_boxes`` (every frame of a batch has one shape), one device-to-host
        copy of the kept boxes with their image index, split per image on the host.
        ultralytics loops over the images in Python (a dozen small kernels and several host
        syncs per image).

        NMS: :func:`nms_matrix`, every image and class at once with a few passes over an
        overlap matrix (a byte per pair) and no serial walk, where batch x (largest candidate
        count)^2 fits :data:`NMS_MATRIX_LIMIT`; otherwise ``torchvision.ops.nms`` on (image,
        class) groups kept apart by float64 offsets, one call per chunk of whole images
        (``_nms_torchvision``).
        Measured on the H200 (YOLOv8 w0.5, batch 16, 40,656 candidates, tools/pipeline_probe.py):
        one torchvision call for the batch 39 ms (its kernel walks the n x n mask in one thread
        block, 35 ms of it), one per image 9.8 ms, against a 4.4 ms engine; the whole postprocess
        takes 4.9 ms with nms_matrix, 7.5 ms with its fixed point in torch ops and 13.2 ms with
        torchvision once per image (one process).
        (``torchvision.ops.batched_nms`` loops over every (image, class) group in Python above
        20,000 box coordinates: at batch 16 that was ~640 calls, 24.5 ms, measured.)

        Runs on the current stream (``run`` makes that its post-processing stream) and returns
        after that stream's copy of the boxes to the host has finished."""
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
        key, groups, width, same = nms_layout(bi, cl, b, self.nc, c.agnostic)
        if groups * width * width <= NMS_MATRIX_LIMIT:
            kept = nms_matrix(boxes, sc, cl, key, groups, width, c.iou, same)
        else:
            kept = self._nms_torchvision(
                boxes, sc, cl, bi, torch.bincount(bi, minlength=b).tolist()
            )
        # by image, score order kept; at most max_det per image
        kept = kept[torch.argsort(bi[kept], stable=True)]
        kb = bi[kept]
        rank = torch.arange(len(kept), device=kept.device) - torch.searchsorted(kb, kb)
        kept = kept[rank < c.max_det]
        # x1 y1 x2 y2 score class | image: the image index rides along to the host (exact in
        # fp32 below 2**24), so one copy brings boxes and per-image counts
        dets = torch.cat(
            (boxes[kept], sc[kept, None], cl[kept, None].to(y.dtype), bi[kept, None].to(y.dtype)),
            1,
        )
        # one call for the whole batch: scale_boxes is elementwise per box (in place), so this
        # equals ultralytics' per-image calls
        ops.scale_boxes((self.imgsz, self.imgsz), dets[:, :4], shape)
        host = dets.to("cpu", non_blocking=True)  # pinned destination when dets is on a GPU
        if dets.is_cuda:
            torch.cuda.current_stream(dets.device).synchronize()  # the copy has landed
        self.counts["boxes"] += len(host)
        counts = torch.bincount(host[:, 6].long(), minlength=b).tolist()
        return list(host[:, :6].contiguous().split(counts))

    def _nms_torchvision(self, boxes, sc, cl, bi, counts):
        """Kept candidate indices, in decreasing score order per chunk of whole images:
        ``torchvision.ops.nms`` on (image, class) groups kept apart by float64 offsets, one call
        per chunk (:func:`nms_chunks`)."""
        from torchvision.ops import nms

        c = self.config
        # NMS groups: one per (image, class), or per image when class-agnostic
        group = bi if c.agnostic else bi * self.nc + cl
        shifted = boxes.double() - boxes.min().double()
        shifted = shifted + (group.double() * (shifted.max() + 1))[:, None]
        sc64 = sc.double()
        kept = []
        for lo, hi in nms_chunks(counts, NMS_CHUNK):
            # indices sorted by decreasing score within the chunk; one host sync per call
            kept.append(nms(shifted[lo:hi], sc64[lo:hi], c.iou) + lo)
        return torch.cat(kept) if len(kept) > 1 else kept[0]

    # -- running -----------------------------------------------------------------------------
    def __call__(self, frames) -> list[np.ndarray]:
        return list(self.run([frames]))[0][1]

    def run(self, batches):
        """Yield ``(latency_s, [boxes per frame])`` for each batch of frames, in order. A batch
        is a (B, H, W, 3) uint8 BGR numpy array, a list of equally sized frames, or a (B, H, W,
        3) uint8 torch tensor: in pinned host memory (or on the device) it is copied to the
        device directly, with no copy on the host, and must not be written until its boxes are
        yielded. On a GPU up to ``config.streams`` batches are in flight (the module docstring
        says how they overlap); the latency runs from a batch's submission to its boxes on the
        host, so it includes queueing behind the batches ahead of it."""
        if not self._on_gpu:
            for frames in batches:
                frames = self._as_batch(frames)
                t0 = time.perf_counter()
                yield self._finish(self._submit_cpu(frames, t0))
            return
        k = self.config.streams
        compute, _ = self._streams()
        # work the caller queued before (e.g. the engine timed on its own stream) comes first
        compute.wait_stream(torch.cuda.current_stream(self.device))
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
            torch.cuda.current_stream(self.device).wait_stream(compute)

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
        """Everything up to the decode, in order (CPU: no streams)."""
        if isinstance(frames, np.ndarray):
            frames = torch.from_numpy(frames if frames.flags.writeable else frames.copy())
        y = self.decode(self.engine(self.preprocess(frames.to(self.device))))
        return _Batch(t0, tuple(frames.shape[1:3]), y)

    def _submit(self, slot: _Slot, frames, t0) -> _Batch:
        """Queue a batch's copy, letterbox, engine and decode on the GPU; returns at once (a
        numpy batch first waits for the slot's pinned buffer to be free, then fills it)."""
        compute, post = self._streams()
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
            # A CUDA-graph engine returns its static output buffer, which its next replay
            # overwrites. decode is queued right after it on this same stream, so stream order
            # has it read this batch's output before the next batch's replay (queued later on
            # this stream) writes it. Keep decode here, on the compute stream.
            y = self.decode(raw)  # a new tensor (the engine's output is not kept)
            ready = torch.cuda.Event()
            ready.record(compute)
        y.record_stream(post)  # allocated on the compute stream, read on the post stream
        return _Batch(t0, tuple(frames.shape[1:3]), y, ready, src)

    def _finish(self, batch: _Batch):
        """Post-process a submitted batch; returns (latency_s, [boxes per frame])."""
        if batch.ready is None:
            dets = self.postprocess(batch.y, batch.shape)
        else:
            _, post = self._streams()
            with torch.cuda.stream(post):
                # this batch's decode only, not the later batches queued on the compute stream
                post.wait_event(batch.ready)
                dets = self.postprocess(batch.y, batch.shape)  # syncs on the post stream only
        return time.perf_counter() - batch.t0, [d.numpy() for d in dets]

    def _streams(self):
        """(compute stream, post-processing stream), made on first use (GPU)."""
        if self._compute is None:
            self._compute = torch.cuda.Stream(self.device)
            # high priority: the host waits on its small NMS kernels (syncs), which should not
            # queue behind the blocks of the engine replays already on the compute stream
            self._post = torch.cuda.Stream(self.device, priority=-1)
        return self._compute, self._post

    def _slot(self, i: int) -> _Slot:
        if i not in self._slots:
            self._slots[i] = _Slot(self.device)
        return self._slots[i]


@dataclass
class _Batch:
    """A submitted batch: what finishing it needs and what must live until then."""

    t0: float  # submission time (perf_counter)
    shape: tuple  # (H, W) of its frames
    y: torch.Tensor  # decoded head output (B, 4 + nc, A)
    ready: object = None  # torch.cuda.Event recorded after the decode (GPU)
    src: object = None  # host tensor the copy reads (the caller's pinned frames): kept alive


class _Slot:
    """One copy slot (GPU): its copy stream, its pinned staging buffers (one per frame shape,
    for batches that are not pinned already) and the event of its last host-to-device copy."""

    def __init__(self, device: torch.device):
        self.stream = torch.cuda.Stream(device)
        self.copied = torch.cuda.Event()
        self._buffers: dict = {}

    def buffer(self, shape: tuple) -> torch.Tensor:
        if shape not in self._buffers:
            self._buffers[shape] = _pinned_empty(shape)
        return self._buffers[shape]


def _pinned_empty(shape: tuple) -> torch.Tensor:
    return torch.empty(shape, dtype=torch.uint8, pin_memory=True)


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
    pinned: bool = True,
) -> dict:
    """Frames per second and per-batch latency (submission of its frames to boxes on the host,
    so queueing behind the batches in flight is included) over ``seconds`` of back-to-back
    batches cycling through ``frames`` (all the same size).

    ``pinned`` (GPU): the stacked batch is pinned once before timing, as frames a camera delivers
    into a ring of pinned buffers would be, so each batch goes straight from there to the device
    and the timed loop measures the pipeline, not a host memcpy per batch (42 MB at batch 16 of
    1080x810 frames); ``pinned=False`` passes the numpy batch, staged each time through the
    pipeline's own pinned buffer. The dict's ``pinned`` says what ran (always False on a CPU)."""
    if not frames or batch < 1:
        raise UserError("measure_pipeline needs frames and a positive batch size")
    stack = np.stack([frames[i % len(frames)] for i in range(batch)])
    pinned = bool(pinned) and pipe.device.type == "cuda"
    if pinned:
        stack = torch.from_numpy(stack).pin_memory()
    # every slot's buffers and streams exist before timing starts
    for _ in pipe.run([stack] * max(warmup_batches, pipe.config.streams)):
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
