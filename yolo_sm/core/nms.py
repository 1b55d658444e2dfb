"""Greedy batch NMS on the device as ultralytics' ``non_max_suppression``: :func:`batch_nms`
(host syncs) and :func:`nms_topk` (fixed-size, no sync, ``exact`` where it matches); Triton."""

from __future__ import annotations

import os
import warnings

import torch

# the NMS DetectionPipeline.postprocess runs (the bench's ``nms`` column)
NMS_IMPL = "nms_matrix_walk"

NMS_CHUNK = 2048  # most candidates of one torchvision NMS call (whole images)
# nms_matrix while groups x width^2 overlap bytes fit this, else torchvision's nms in chunks;
# NMS_IOU_CHUNK bounds the IoU temporaries of one torch pass (elements)
NMS_MATRIX_LIMIT = 1 << 31
NMS_IOU_CHUNK = 1 << 25


def triton_cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def triton_interpret() -> bool:
    """Triton's interpreter (``TRITON_INTERPRET=1``) runs its kernels on CPU tensors (tests)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def cached_kernel(cache: dict, define):
    """``define(triton, tl)``'s kernels, made once per interpreter mode; None without Triton."""
    mode = triton_interpret()
    if mode not in cache:
        try:
            import triton
            import triton.language as tl

            cache[mode] = define(triton, tl)
        except Exception:  # noqa: BLE001 - no Triton: torch ops do the same in more passes
            cache[mode] = None
    return cache[mode]


def kernel_failed(cache: dict, what: str, e: Exception, instead: str) -> None:
    """A cached kernel failed at launch: warn once, naming what runs ``instead``, and drop it."""
    warnings.warn(
        f"the Triton {what} kernel failed ({type(e).__name__}: {e}); {instead}", stacklevel=3
    )
    cache[triton_interpret()] = None


def nms_label(topk: int = 0) -> str:
    """The ``nms`` column of a pipeline with ``nms_topk`` = ``topk``."""
    return f"{NMS_IMPL}+top{topk}" if topk > 0 else NMS_IMPL


def nms_chunks(counts: list[int], limit: int) -> list[tuple[int, int]]:
    """[lo, hi) ranges of consecutive whole images of at most ``limit`` candidates (unless one
    image has more); images with none skipped."""
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
    """``(key, groups, width, same_class)`` of :func:`nms_matrix`'s layout (one host sync): per
    (image, class), or per image with a same-class test where that is smaller."""
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
    """``S[g, j, i]``: box j outscores box i in its group, both real, same class (``cls`` given)
    and IoU (fp32, torchvision's formula) above ``iou``; torch ops, :data:`NMS_IOU_CHUNK` a pass."""
    groups, width = valid.shape
    bx = bx.float()
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


#: what a failed NMS kernel's warning says runs instead (kernel_failed)
TORCH_OPS_INSTEAD = "NMS uses torch ops from now on (same result, more passes)"


def nms_matrix(boxes, scores, cls, key, groups, width, iou, same_class=False):
    """Greedy NMS of every group at once (laid out per group by decreasing score, kept by
    :func:`greedy_keep`): the kept indices by decreasing score, as ``torchvision.ops.nms`` per
    group (whose CUDA kernel walks its mask in one thread block)."""
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
    c = cls[safe] if same_class else None
    keep, settled = greedy_keep(bx, c, valid, iou)
    if not bool(settled.all()):  # torch ops whose fixed steps did not settle: to the end
        keep = suppress_fixpoint(overlap_matrix(bx, c, valid, iou), valid)
    kept = idx[keep]
    return kept[torch.sort(scores[kept], descending=True, stable=True).indices]


def suppress_fixpoint(S: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """The fixed point of ``keep = valid and not any_j(keep_j and S[:, j, i])`` from all-kept."""
    keep = valid
    while True:
        new = _torch_step(S, valid, keep)
        if torch.equal(new, keep):
            return keep
        keep = new


#: fixed-point steps :func:`greedy_keep` runs without the walk kernel (deeper: the full NMS)
TOPK_STEPS = 16


def suppress_steps(S: torch.Tensor, valid: torch.Tensor, steps: int):
    """``steps`` steps of :func:`suppress_fixpoint` without host sync: (keep, settled per group)."""
    keep = before = valid
    for _ in range(steps):
        keep, before = _torch_step(S, valid, keep), keep
    return keep, (keep == before).all(1)


def _torch_step(S: torch.Tensor, valid: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    return valid & ~(S & keep[:, :, None]).any(1)


def nms_torchvision(boxes, sc, cl, bi, counts: list[int], iou: float, nc: int, agnostic: bool):
    """Kept indices by ``torchvision.ops.nms`` on groups kept apart by float64 offsets, one call
    per chunk of whole images."""
    from torchvision.ops import nms

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
    """Kept indices of a batch's candidates by decreasing score within an image: :func:`nms_matrix`
    within :data:`NMS_MATRIX_LIMIT`, else :func:`nms_torchvision`."""
    key, groups, width, same = nms_layout(bi, cl, b, nc, agnostic)
    if groups * width * width <= NMS_MATRIX_LIMIT:
        return nms_matrix(boxes, sc, cl, key, groups, width, iou, same)
    counts = torch.bincount(bi, minlength=b).tolist()
    return nms_torchvision(boxes, sc, cl, bi, counts, iou, nc, agnostic)


def topk_candidates(y: torch.Tensor, conf: float, k: int):
    """Each image's first ``k`` anchors in the full NMS's order: ``(boxes (B, k, 4) xyxy, score,
    class, valid, candidates (B,))``."""
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
    """Greedy NMS of each row of ``bx`` (groups, width, 4) by score, no host sync: ``(keep,
    settled)``; a GPU walks overlap bits, elsewhere :data:`TOPK_STEPS` fixed-point steps."""
    groups, width = valid.shape
    walk = _triton_walk() if bx.is_cuda or triton_interpret() else None
    if walk is not None and groups and width:
        try:
            bits = overlap_bits(bx, cls, valid, iou)
            words = bits.shape[-1]
            keep = torch.empty((groups, width), dtype=torch.uint8, device=bx.device)
            walk[(groups,)](
                bits, valid.to(torch.uint8).contiguous(), keep, width, words,
                WORDS=1 << max(words - 1, 0).bit_length(), num_warps=1,
            )  # fmt: skip
            return keep.view(torch.bool), torch.ones(groups, dtype=torch.bool, device=bx.device)
        except Exception as e:  # noqa: BLE001 - a kernel that does not compile here
            kernel_failed(_TRITON_WALK, "walk", e, TORCH_OPS_INSTEAD)
    return suppress_steps(overlap_matrix(bx, cls, valid, iou), valid, TOPK_STEPS)


#: words of 32 overlap bits per program of the overlap_bits kernel (its tile: 32 rows x 32 * WB)
OVERLAP_BITS_WB = 4


def overlap_bits(bx: torch.Tensor, cls, valid: torch.Tensor, iou: float) -> torch.Tensor:
    """:func:`overlap_matrix`'s ``S`` packed 32 pairs to an int32 word (groups, width, words),
    from each row's own word on; GPU or Triton's interpreter."""
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
    parts = _triton_walk_parts()
    return parts["walk"] if parts is not None else None


def _triton_walk_parts():
    return cached_kernel(_TRITON_WALK, _define_walk)


def _define_walk(triton, tl):

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
    """Candidates per image of :func:`nms_topk`: ``k``, at least ``max_det``, at most all."""
    return min(anchors, max(k, max_det))


def nms_topk(
    y: torch.Tensor, conf: float, iou: float, max_det: int, k: int, agnostic: bool, chosen=None
):
    """Fixed-size NMS on each image's ``k`` best candidates, no host sync: ``(dets (B, max_det,
    6), counts, exact, candidates)``; ``chosen``: :func:`topk_candidates` made by the caller."""
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
