"""Greedy non-maximum suppression of a whole batch on the device, as ultralytics'
``non_max_suppression`` decides it (best class per anchor, score threshold, class-aware NMS,
``max_det`` per image), for :class:`yolo_sm.core.pipeline.DetectionPipeline`.

Two ways to one answer:

- :func:`batch_nms`: the candidates above the threshold gathered at their data-dependent count
  (host syncs for the count and the layout), then :func:`nms_matrix` (every image and class at
  once: an overlap matrix and a fixed point, no serial walk) or ``torchvision.ops.nms`` in
  chunks of whole images where the matrix would not fit.
- :func:`nms_topk`: fixed-size buffers and no host sync: the ``k`` best-scoring candidates of
  each image, greedy NMS on them (:func:`greedy_keep`: on a GPU their overlaps packed as bits
  and one walk per image in score order; elsewhere :data:`TOPK_STEPS` steps of the fixed
  point), the first ``max_det`` kept boxes written to a (B, max_det, 6) buffer. Greedy NMS
  decides a box from the boxes that outscore it alone, so the boxes kept among an image's
  ``k`` best are exactly the boxes the full NMS keeps among them (taken in the full NMS's own
  order, ties included); the result is the full NMS's wherever greedy NMS settled (the walk
  always does) and the image had at most ``k`` candidates or ``max_det`` of its ``k`` are
  kept. ``exact`` says which images that holds for; the caller runs :func:`batch_nms` for a
  batch where it does not.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from yolo_sm.core.triton_kernels import (
    cached_kernel,
    kernel_failed,
    triton_cdiv,
    triton_interpret,
)

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


def nms_label(topk: int = 0) -> str:
    """The NMS a pipeline with ``PipelineConfig.nms_topk`` = ``topk`` runs, as the bench's
    ``nms`` column names it: :data:`NMS_IMPL`, with ``+top<k>`` where the fixed-size path
    comes first."""
    return f"{NMS_IMPL}+top{topk}" if topk > 0 else NMS_IMPL


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
    kernel = _triton_overlap() if bx.is_cuda or triton_interpret() else None
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
            kernel_failed(_TRITON_OVERLAP, "overlap", e, TORCH_OPS_INSTEAD)
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


_TRITON_OVERLAP: dict = {}
#: what a failed NMS kernel's warning says runs instead (triton_kernels.kernel_failed)
TORCH_OPS_INSTEAD = "NMS uses torch ops from now on (same result, more passes)"


def _triton_overlap():
    """The Triton kernel behind :func:`overlap_matrix` (one per interpreter mode), or None."""
    return cached_kernel(_TRITON_OVERLAP, _define_overlap)


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
    kernel = _triton_suppress() if S.is_cuda or triton_interpret() else None
    if kernel is not None and groups and width:
        # a chain of suppressors is at most width long: width + 1 steps reach the point
        bufs = _StepBuffers.of(S, valid, width + FIXPOINT_ROUND + 1)
        try:
            step = 0
            while step <= width:
                bufs.launch(kernel, step, FIXPOINT_ROUND)
                step += FIXPOINT_ROUND
                if int(bufs.changed[step - 1]) == 0:  # host sync: the last step changed nothing
                    return bufs.after(step).view(torch.bool)
        except Exception as e:  # noqa: BLE001 - a kernel that does not compile here
            kernel_failed(_TRITON_SUPPRESS, "suppression", e, TORCH_OPS_INSTEAD)
    keep = valid
    while True:
        new = _torch_step(S, valid, keep)
        if torch.equal(new, keep):
            return keep
        keep = new


#: fixed-point steps :func:`greedy_keep` runs where the walk kernel cannot (no host check): an
#: image whose suppressions chain deeper is handed to the full NMS (on the bundled photos the
#: fixed point takes 6-10)
TOPK_STEPS = 16


def suppress_steps(S: torch.Tensor, valid: torch.Tensor, steps: int):
    """``steps`` steps of :func:`suppress_fixpoint`'s iteration from all-kept, with no host
    sync: ``(keep, settled)``, ``keep`` the (groups, width) mask after the last step and
    ``settled`` (groups,) whether that step changed nothing in the group (then ``keep`` is the
    fixed point: greedy NMS's kept boxes). On a GPU each step is the Triton kernel of
    :func:`suppress_fixpoint`; elsewhere torch ops."""
    groups, width = valid.shape
    kernel = _triton_suppress() if S.is_cuda or triton_interpret() else None
    if kernel is not None and groups and width and steps > 0:
        bufs = _StepBuffers.of(S, valid, steps + 1)  # the counts are not read here
        try:
            bufs.launch(kernel, 0, steps)
            keep, before = bufs.after(steps), bufs.after(steps - 1)
            return keep.view(torch.bool), (keep == before).all(1)
        except Exception as e:  # noqa: BLE001 - a kernel that does not compile here
            kernel_failed(_TRITON_SUPPRESS, "suppression", e, TORCH_OPS_INSTEAD)
    keep = before = valid
    for _ in range(steps):
        keep, before = _torch_step(S, valid, keep), keep
    return keep, (keep == before).all(1)


def _torch_step(S: torch.Tensor, valid: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """One step of the fixed point in torch ops: ``valid and not any_j(keep_j and S_ji)``."""
    return valid & ~(S & keep[:, :, None]).any(1)


@dataclass
class _StepBuffers:
    """What the Triton step kernel works on: S and valid as bytes, two keep masks (step t
    reads ``keep[t % 2]`` and writes the other) and one int32 count per step of the boxes it
    changed."""

    S: torch.Tensor
    valid: torch.Tensor
    keep: list
    changed: torch.Tensor

    BLOCK = 64  # rows and columns of S per program

    @classmethod
    def of(cls, S: torch.Tensor, valid: torch.Tensor, counts: int) -> _StepBuffers:
        v8 = valid.to(torch.uint8).contiguous()
        changed = torch.zeros(counts, dtype=torch.int32, device=S.device)
        return cls(
            S.view(torch.uint8).contiguous(), v8, [v8.clone(), torch.empty_like(v8)], changed
        )

    def launch(self, kernel, first: int, n: int) -> None:
        """Queue steps ``first`` .. ``first + n - 1`` (no host sync)."""
        groups, width = self.valid.shape
        grid = (groups, triton_cdiv(width, self.BLOCK))
        for t in range(first, first + n):
            kernel[grid](
                self.S, self.keep[t % 2], self.valid, self.keep[(t + 1) % 2], self.changed[t:],
                width, BJ=self.BLOCK, BI=self.BLOCK,
            )  # fmt: skip

    def after(self, steps: int) -> torch.Tensor:
        """The keep mask (uint8) after ``steps`` steps."""
        return self.keep[steps % 2]


_TRITON_SUPPRESS: dict = {}


def _triton_suppress():
    """The Triton kernel of one :func:`suppress_fixpoint` step (one per interpreter mode), or
    None. Program (g, column block): for its columns i, OR over rows j < i of S[g, j, i] and
    keep[g, j] (tiles of S read row by row, coalesced along i), then keep_out = valid and not
    suppressed, and the count of changed boxes added to ``changed[0]``."""
    return cached_kernel(_TRITON_SUPPRESS, _define_suppress)


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


def nms_torchvision(boxes, sc, cl, bi, counts: list[int], iou: float, nc: int, agnostic: bool):
    """Kept candidate indices, in decreasing score order per chunk of whole images:
    ``torchvision.ops.nms`` on (image, class) groups kept apart by float64 offsets, one call
    per chunk (:func:`nms_chunks`)."""
    from torchvision.ops import nms

    # NMS groups: one per (image, class), or per image when class-agnostic
    group = bi if agnostic else bi * nc + cl
    shifted = boxes.double() - boxes.min().double()
    shifted = shifted + (group.double() * (shifted.max() + 1))[:, None]
    sc64 = sc.double()
    kept = []
    for lo, hi in nms_chunks(counts, NMS_CHUNK):
        # indices sorted by decreasing score within the chunk; one host sync per call
        kept.append(nms(shifted[lo:hi], sc64[lo:hi], iou) + lo)
    return torch.cat(kept) if len(kept) > 1 else kept[0]


def batch_nms(boxes, sc, cl, bi, b: int, nc: int, iou: float, agnostic: bool):
    """Kept indices of the candidates (``boxes`` xyxy, scores ``sc``, classes ``cl``, image
    ``bi`` of each, images in order) of a batch of ``b`` images: :func:`nms_matrix` where batch
    x (largest group)^2 fits :data:`NMS_MATRIX_LIMIT`, else :func:`nms_torchvision`. Within an
    image in decreasing score order (ties: candidate order)."""
    key, groups, width, same = nms_layout(bi, cl, b, nc, agnostic)
    if groups * width * width <= NMS_MATRIX_LIMIT:
        return nms_matrix(boxes, sc, cl, key, groups, width, iou, same)
    counts = torch.bincount(bi, minlength=b).tolist()
    return nms_torchvision(boxes, sc, cl, bi, counts, iou, nc, agnostic)


def topk_candidates(y: torch.Tensor, conf: float, k: int):
    """The first ``k`` anchors of each image of a decoded batch ``y`` (B, 4 + nc, A; xywh,
    class probabilities) in the order the full NMS walks them (decreasing score, ties by
    anchor index: a stable sort, where ``torch.topk`` would leave the order of equal scores,
    and so which of them make the cut, open), as fixed-size (B, k) buffers: ``(boxes (B, k,
    4) xyxy, score, class, valid (score above ``conf``), candidates (B,): how many anchors
    pass ``conf``)``."""
    from ultralytics.utils import ops

    b = y.shape[0]
    scores, cls = y[:, 4:].max(1)  # (B, A): best class per anchor
    passed = scores > conf
    masked = torch.where(passed, scores, torch.full_like(scores, float("-inf")))
    ai = torch.sort(masked, dim=1, descending=True, stable=True).indices[:, :k]
    sc = masked.gather(1, ai)
    boxes = ops.xywh2xyxy(y[:, :4].gather(2, ai[:, None].expand(b, 4, k)).transpose(1, 2))
    return boxes, sc, cls.gather(1, ai), sc > conf, passed.sum(1)


def greedy_keep(bx: torch.Tensor, cls, valid: torch.Tensor, iou: float):
    """Greedy NMS of every group's row of ``bx`` (groups, width, 4) xyxy, each row in decreasing
    score order, with no host sync: ``(keep, settled)``, ``keep`` (groups, width) bool and
    ``settled`` (groups,) whether ``keep`` is greedy NMS's answer for that group.

    On a GPU (or under Triton's interpreter) two Triton kernels: :func:`overlap_bits` packs
    :func:`overlap_matrix`'s S 32 pairs to a word, then one program per group walks its rows in
    order as greedy NMS does (:func:`_define_walk`): 32 rows at a time, their keep decisions
    serially from the block's own word, then the kept rows' words OR-ed into the group's
    suppressed mask. Every group is settled. The walk is serial in the row (``width`` / 32
    blocks), where a fixed-point step is parallel but needs one pass over S per step and a
    bound on the steps; at 1,024 candidates per image the walk reads each word of S once.
    Elsewhere (or where a kernel does not compile) :func:`suppress_steps` runs
    :data:`TOPK_STEPS` fixed-point steps on the byte matrix, and a group whose chain of
    suppressors is deeper is not settled."""
    groups, width = valid.shape
    walk = _triton_walk() if bx.is_cuda or triton_interpret() else None
    if walk is not None and groups and width:
        try:
            bits = overlap_bits(bx, cls, valid, iou)
            words = bits.shape[-1]
            keep = torch.empty((groups, width), dtype=torch.uint8, device=bx.device)
            walk[(groups,)](
                bits, valid.to(torch.uint8).contiguous(), keep, width, words,
                WORDS=_next_power_of_2(words), num_warps=1,
            )  # fmt: skip
            return keep.view(torch.bool), torch.ones(groups, dtype=torch.bool, device=bx.device)
        except Exception as e:  # noqa: BLE001 - a kernel that does not compile here
            kernel_failed(_TRITON_WALK, "walk", e, TORCH_OPS_INSTEAD)
    return suppress_steps(overlap_matrix(bx, cls, valid, iou), valid, TOPK_STEPS)


def _next_power_of_2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


#: words of 32 overlap bits per program of the overlap_bits kernel (its tile: 32 rows x 32 * WB)
OVERLAP_BITS_WB = 4


def overlap_bits(bx: torch.Tensor, cls, valid: torch.Tensor, iou: float) -> torch.Tensor:
    """:func:`overlap_matrix`'s ``S`` as bits, by one Triton kernel: (groups, width, words)
    int32, ``words`` = ceil(width / 32), bit ``i % 32`` of word ``i // 32`` of row ``j`` is
    ``S[g, j, i]``. Only the words from row j's own (``i // 32 >= j // 32``) on are written:
    the others hold no pair (j < i) and the walk reads none of them. GPU or Triton's
    interpreter only (:func:`greedy_keep` says what runs elsewhere)."""
    groups, width = valid.shape
    words = triton_cdiv(width, 32)
    bx = bx.float().contiguous()
    out = torch.empty((groups, width, words), dtype=torch.int32, device=bx.device)
    c = cls.contiguous() if cls is not None else valid  # unused when SAME_CLASS is off
    wb = OVERLAP_BITS_WB
    grid = (groups, triton_cdiv(width, 32), triton_cdiv(words, wb))
    _triton_walk_parts()["overlap_bits"][grid](
        bx, c, valid.to(torch.uint8).contiguous(), out, width, words, float(iou),
        SAME_CLASS=cls is not None, WB=wb,
    )  # fmt: skip
    return out


_TRITON_WALK: dict = {}


def _triton_walk():
    """The walk kernel of :func:`greedy_keep` (one per interpreter mode), or None where Triton
    is missing or the kernels fail."""
    parts = _triton_walk_parts()
    return parts["walk"] if parts is not None else None


def _triton_walk_parts():
    return cached_kernel(_TRITON_WALK, _define_walk)


def _define_walk(triton, tl):
    """Both kernels of :func:`greedy_keep`: ``overlap_bits`` and ``walk``."""

    @triton.jit
    def _overlap_bits(bx, cls, valid, out, width, words, iou, SAME_CLASS: tl.constexpr,
                      WB: tl.constexpr):  # fmt: skip
        g = tl.program_id(0)
        jb = tl.program_id(1)  # rows jb * 32 ...: their own word is jb
        wb = tl.program_id(2)  # words wb * WB ...
        if (wb + 1) * WB > jb:  # a tile wholly before the rows' own word holds no pair
            j = jb * 32 + tl.arange(0, 32)  # suppressor (row)
            i = wb * WB * 32 + tl.arange(0, WB * 32)  # suppressed (column)
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
            over = over & (j[:, None] < i[None, :]) & vj[:, None] & mi[None, :]
            if SAME_CLASS:
                cj = tl.load(cls + g * width + j, mask=mj, other=-1)
                ci = tl.load(cls + g * width + i, mask=mi, other=-2)
                over = over & (cj[:, None] == ci[None, :])
            # 32 pairs to a word: distinct bits, so their int32 sum is their OR (bit 31 too)
            shifted = over.to(tl.int32) << (tl.arange(0, WB * 32) % 32)[None, :]
            packed = tl.sum(tl.reshape(shifted, (32, WB, 32)), axis=2)
            wd = wb * WB + tl.arange(0, WB)
            ptr = out + (g * width + j[:, None]) * words + wd[None, :]
            tl.store(ptr, packed, mask=mj[:, None] & (wd[None, :] < words))

    @triton.jit
    def _walk(bits, valid, keep, width, words, WORDS: tl.constexpr):
        g = tl.program_id(0)
        wd = tl.arange(0, WORDS)
        r = tl.arange(0, 32)
        suppressed = tl.zeros([WORDS], dtype=tl.int32)  # bits of the boxes a kept box overlaps
        for d in range(0, words):  # rows d * 32 ...: their own word is d
            j = d * 32 + r
            mj = j < width
            v = tl.load(valid + g * width + j, mask=mj, other=0).to(tl.int32)
            # out: the block's suppressed and invalid (or padding) rows, as bits
            out = tl.sum(tl.where(wd == d, suppressed, 0)) | ~tl.sum(v << r)
            for b in tl.static_range(32):  # greedy: row b, if kept, suppresses its later boxes
                # loads that do not depend on the decisions: issued ahead of the serial chain
                at = bits + (g * width + d * 32 + b) * words
                inside = d * 32 + b < width
                word = tl.load(at + d, mask=inside, other=0)  # the row's own word
                later = tl.load(at + wd, mask=inside & (wd >= d) & (wd < words), other=0)
                kept = ((out >> b) & 1) == 0
                out = tl.where(kept, out | word, out)
                suppressed = tl.where(kept, suppressed | later, suppressed)
            tl.store(keep + g * width + j, (((~out >> r) & 1) != 0).to(tl.uint8), mask=mj)

    return {"overlap_bits": _overlap_bits, "walk": _walk}


def topk_size(anchors: int, k: int, max_det: int) -> int:
    """Candidates per image :func:`nms_topk` works on: ``k``, at least ``max_det``, at most the
    anchors."""
    return min(anchors, max(k, max_det))


def nms_topk(
    y: torch.Tensor, conf: float, iou: float, max_det: int, k: int, agnostic: bool, chosen=None
):
    """Fixed-size NMS of a decoded batch ``y`` (B, 4 + nc, A) on its ``k`` best candidates per
    image (:func:`topk_size`; ``chosen``: what :func:`topk_candidates` returns for them, made
    by the caller, e.g. compiled with the decode): ``(dets, counts, exact, candidates)``. ``dets``
    (B, max_det, 6): x1 y1 x2 y2 score class of the first ``counts[i]`` kept boxes of image i in
    decreasing score order, zeros after; ``exact`` (B,) bool: the rows are the full NMS's (the
    module docstring says when; :func:`greedy_keep` settled);
    ``candidates`` (B,): anchors above ``conf``. No host sync."""
    b, _, a = y.shape
    k = topk_size(a, k, max_det)
    chosen = topk_candidates(y, conf, k) if chosen is None else chosen
    boxes, sc, cl, valid, candidates = chosen
    keep, settled = greedy_keep(boxes, None if agnostic else cl, valid, iou)  # no host sync
    rank = keep.cumsum(1) - 1
    first = keep & (rank < max_det)
    counts = first.sum(1)
    # the k are a prefix of the full NMS's order: once max_det of them are kept, no box after
    # them can be among the first max_det
    exact = settled & ((candidates <= k) | (counts >= max_det))
    rows = torch.cat((boxes, sc[..., None], cl[..., None].to(boxes.dtype)), -1)  # (B, k, 6)
    # every box not among the first max_det goes to a spare row max_det, dropped after
    slot = torch.where(first, rank, torch.full_like(rank, max_det))
    dets = torch.zeros((b, max_det + 1, 6), dtype=boxes.dtype, device=boxes.device)
    dets.scatter_(1, slot[..., None].expand(b, k, 6), rows)
    return dets[:, :max_det], counts, exact, candidates
