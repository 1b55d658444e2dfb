"""The end-to-end pipeline on CPU: same geometry and boxes as ultralytics' own predict."""

import contextlib

import numpy as np
import pytest
import torch

from tests.fixtures.ultralytics_oracle import ultralytics_predict
from yolo_sm.contract.errors import UserError
from yolo_sm.core.engines import EngineConfig, build_engine
from yolo_sm.core.pipeline import (
    DetectionPipeline,
    PipelineConfig,
    letterbox_gpu,
    letterbox_params,
    match_boxes,
    measure_pipeline,
    set_class_prior,
)


@pytest.fixture(scope="module")
def frames():
    import cv2

    from yolo_sm.core.images import bundled_images

    return [cv2.imread(str(p)) for p in bundled_images()]  # 1080x810 bus, 720x1280 zidane


@pytest.fixture(scope="module")
def detector():
    from yolo_sm.core.models import build_yolo

    m = build_yolo("yolov8", 0.25)
    set_class_prior(m, 0.001, spread=1.5)
    return m


@pytest.mark.parametrize("shape", [(1080, 810), (720, 1280), (640, 640), (100, 3000)])
def test_letterbox_matches_ultralytics(shape):
    from ultralytics.data.augment import LetterBox

    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (*shape, 3), dtype=np.uint8)
    ref = LetterBox(640, auto=False, stride=32)(image=img)
    ref = torch.from_numpy(ref).permute(2, 0, 1).flip(0).float() / 255
    ours = letterbox_gpu(torch.from_numpy(img[None]), 640, torch.float32, False)[0]
    _, nh, nw, top, left = letterbox_params(*shape, 640)
    assert ours.shape == ref.shape == (3, 640, 640)
    # same geometry: the grey padding is exactly where ultralytics puts it
    pad = torch.ones(640, 640, dtype=torch.bool)
    pad[top : top + nh, left : left + nw] = False
    assert torch.equal(ours[:, pad], ref[:, pad])
    assert (ours[:, pad] == 114 / 255).all()
    # resampled pixels: bilinear vs OpenCV's fixed-point INTER_LINEAR, within a few levels
    assert (ours - ref).abs().max() <= 4 / 255 and (ours - ref).abs().mean() < 2e-3


def test_decode_equals_ultralytics_head(detector):
    import copy

    eng = build_engine(
        detector,
        EngineConfig(
            precision="fp32", layout="nchw", batch=1, imgsz=320, device="cpu", check=False
        ),
    )
    pipe = DetectionPipeline(detector, eng)
    x = torch.rand(1, 3, 320, 320)
    det = copy.deepcopy(detector.det)
    det.model[-1].training = False
    with torch.no_grad():
        ref = det(x)[0]
    torch.testing.assert_close(pipe.decode(eng(x)), ref, rtol=1e-5, atol=1e-4)


def test_boxes_agree_with_ultralytics_predict(frames, detector):
    bus = frames[0]
    batch = [bus, np.ascontiguousarray(bus[:, ::-1])]
    eng = build_engine(
        detector,
        EngineConfig(
            precision="fp32", layout="nchw", batch=2, imgsz=640, device="cpu", check=False
        ),
    )
    ours = DetectionPipeline(detector, eng)(np.stack(batch))
    ref = ultralytics_predict(detector, batch, 2, "cpu", False)
    for o, r in zip(ours, ref, strict=True):
        assert len(o) > 50 and abs(len(o) - len(r)) <= 0.05 * len(r)
        # at most ~20 % differ, near NMS ties and the max_det cut (resampling noise)
        assert match_boxes(o, r) >= 0.75 and match_boxes(r, o) >= 0.75
        assert (o[:, [0, 2]] >= 0).all() and (o[:, [0, 2]] <= bus.shape[1]).all()


def test_streams_and_bad_frames(frames, detector):
    eng = build_engine(
        detector,
        EngineConfig(
            precision="fp32", layout="nhwc", batch=1, imgsz=320, device="cpu", check=False
        ),
    )
    pipe = DetectionPipeline(detector, eng, PipelineConfig(streams=1))
    stats = measure_pipeline(pipe, [frames[1]], batch=1, seconds=0.3)
    assert stats["frames"] >= 1 and stats["frames_per_s"] > 0
    assert stats["latency_p99_ms"] >= stats["latency_p50_ms"] > 0
    # NMS's work per frame: the same frame (the bus) every time, so exactly one frame's counts
    bus = frames[0]
    stats = measure_pipeline(pipe, [bus], batch=1, seconds=0.2)
    boxes = pipe(bus[None])[0]
    y = pipe.decode(eng(pipe.preprocess(torch.from_numpy(bus[None].copy()))))
    cand = int((y[:, 4:].max(1).values > pipe.config.conf).sum())
    assert cand > len(boxes) > 0
    assert stats["candidates_per_frame"] == cand and stats["boxes_per_frame"] == len(boxes)
    assert pipe.counts["frames"] == stats["frames"] + 1  # the timed run and the call above
    with pytest.raises(UserError, match="uint8"):
        pipe(np.zeros((1, 32, 32, 3), dtype=np.float32))
    with pytest.raises(UserError, match="stream"):
        DetectionPipeline(detector, eng, PipelineConfig(streams=0))


def test_a_pipeline_graph_needs_the_fixed_size_nms_and_a_capturable_engine(frames, detector):
    """The whole-batch graph refuses, in one sentence each, a pipeline without the fixed-size
    NMS (its output size would depend on the data) and an engine with nothing to capture (one
    that replays a graph of its own); on a CPU it runs the fixed-size path without a graph,
    with the boxes of the full NMS."""
    from dataclasses import replace

    eng = build_engine(
        detector,
        EngineConfig(
            precision="fp32", layout="nhwc", batch=1, imgsz=320, device="cpu", check=False
        ),
    )
    assert eng.capture is not None  # eager: its forward can be captured
    with pytest.raises(UserError, match="fixed-size NMS"):
        DetectionPipeline(detector, eng, PipelineConfig(graph=True))
    with pytest.raises(UserError, match="cannot be captured"):
        DetectionPipeline(
            detector, replace(eng, capture=None), PipelineConfig(graph=True, nms_topk=300)
        )
    graphed = DetectionPipeline(detector, eng, PipelineConfig(graph=True, nms_topk=1024))
    full = DetectionPipeline(detector, eng, PipelineConfig())
    for o, r in zip(graphed(frames[0][None]), full(frames[0][None]), strict=True):
        assert len(o) > 0 and np.array_equal(o, r)
    eng.close()
    assert eng.capture is None  # a closed engine lends nothing


def test_nms_chunks_cover_whole_images_up_to_the_limit():
    from yolo_sm.core.nms import nms_chunks

    assert nms_chunks([3, 0, 4, 5, 0], 10) == [(0, 7), (7, 12)]
    assert nms_chunks([30, 2, 2], 10) == [(0, 30), (30, 34)]  # a big image alone
    assert nms_chunks([2, 2, 30], 10) == [(0, 4), (4, 34)]
    assert nms_chunks([1, 1, 1], 1) == [(0, 1), (1, 2), (2, 3)]
    assert nms_chunks([0, 0], 10) == []
    assert nms_chunks([5, 5], 10**9) == [(0, 10)]


def _use_nms(monkeypatch, nms_impl: str) -> None:
    """Steer postprocess to one NMS path: "matrix" (the default), "torchvision" (in chunks),
    "..., one call" / "..., one call per image" (chunk size), "..., per IoU pass" (the matrix
    built one group at a time)."""
    from yolo_sm.core import nms

    if nms_impl.startswith("torchvision"):
        monkeypatch.setattr(nms, "NMS_MATRIX_LIMIT", 0)
    if nms_impl.endswith("one call"):
        monkeypatch.setattr(nms, "NMS_CHUNK", 10**9)
    if nms_impl.endswith("per image"):
        monkeypatch.setattr(nms, "NMS_CHUNK", 1)
    if nms_impl.endswith("per IoU pass"):
        monkeypatch.setattr(nms, "NMS_IOU_CHUNK", 1)


def _postprocessor(detector, cfg, monkeypatch, chunk=None):
    """A CPU pipeline at 320 px whose postprocess the NMS tests call directly; ``chunk``
    overrides NMS_CHUNK. torchvision is imported first: ultralytics then uses its NMS too."""
    import torchvision  # noqa: F401

    from yolo_sm.core import nms

    if chunk is not None:
        monkeypatch.setattr(nms, "NMS_CHUNK", chunk)
    eng = build_engine(
        detector,
        EngineConfig(
            precision="fp32", layout="nchw", batch=1, imgsz=320, device="cpu", check=False
        ),
    )
    return DetectionPipeline(detector, eng, cfg)


@pytest.mark.parametrize(
    "agnostic, power, nms_impl",
    [
        (False, 8, "matrix"),
        (True, 8, "matrix"),
        (False, 1, "matrix"),
        (True, 1, "matrix, one image per IoU pass"),
        (False, 8, "torchvision"),
        (False, 1, "torchvision"),
        (False, 1, "torchvision, one call"),
        (True, 1, "torchvision, one call per image"),
    ],
)
def test_batched_nms_equals_ultralytics_per_image_loop(
    detector, agnostic, power, nms_impl, monkeypatch
):
    """The batched NMS returns what ultralytics' per-image loop returns: same boxes, scores and
    classes in the same order, max_det cut included (images with none, some, and more than
    max_det survivors), with the overlap-matrix fixed point (all images at once, or the IoU
    built one image at a time) and with torchvision's nms, whether the images share one call,
    each get their own or the default chunking decides."""
    _use_nms(monkeypatch, nms_impl)
    from ultralytics.utils import nms, ops

    cfg = PipelineConfig(max_det=40, agnostic=agnostic)
    pipe = _postprocessor(detector, cfg, monkeypatch)
    gen = torch.Generator().manual_seed(0)
    a, nc = 2100, pipe.nc
    xy = torch.rand(3, 2, a, generator=gen) * 320
    wh = torch.rand(3, 2, a, generator=gen) * 60 + 4
    # power 8: few anchors pass 0.25; power 1: nearly all do (> 20,000 box coordinates, where
    # torchvision's batched_nms would loop over the groups)
    cls = torch.rand(3, nc, a, generator=gen) ** power
    cls[1] *= 0.2  # image 1: no candidate at all
    y = torch.cat((xy, wh, cls), 1)
    ours = pipe.postprocess(y, (480, 640))
    ref = nms.non_max_suppression(y.clone(), cfg.conf, cfg.iou, None, agnostic, max_det=40)
    for o, r in zip(ours, ref, strict=True):
        r[:, :4] = ops.scale_boxes((320, 320), r[:, :4], (480, 640))
        assert o.shape == r.shape
        torch.testing.assert_close(o, r)
    assert len(ours[1]) == 0 and len(ours[0]) == 40


@pytest.mark.parametrize("agnostic", [False, True])
@pytest.mark.parametrize(
    "nms_impl, classes",
    [
        ("matrix", 3),  # few classes: images as groups, with a same-class test
        ("matrix", 40),  # many classes: (image, class) groups
        ("torchvision", 3),
        ("torchvision, one call per image", 3),
        ("torchvision, one call", 40),
    ],
)
def test_nms_on_clustered_boxes_equals_ultralytics(
    detector, agnostic, nms_impl, classes, monkeypatch
):
    """Detections as a detector makes them: a few objects, each with dozens of jittered boxes
    of competing classes, so that many pairs overlap near the IoU threshold and suppression
    chains run several boxes deep; no max_det cut hides a difference. (Random boxes spread over
    the image rarely overlap: a wrong IoU threshold passed the test above.)"""
    from ultralytics.utils import nms, ops

    from yolo_sm.core import nms as nms_mod

    _use_nms(monkeypatch, nms_impl)
    cfg = PipelineConfig(max_det=10_000, agnostic=agnostic)
    pipe = _postprocessor(detector, cfg, monkeypatch)
    gen = torch.Generator().manual_seed(1)
    b, a, nc = 2, 2100, pipe.nc
    obj = torch.randint(0, 8, (b, a), generator=gen)  # 8 objects per image
    centre = torch.rand(b, 2, 8, generator=gen) * 260 + 30
    size = torch.rand(b, 2, 8, generator=gen) * 60 + 20
    xy = torch.gather(centre, 2, obj[:, None].expand(b, 2, a))
    wh = torch.gather(size, 2, obj[:, None].expand(b, 2, a))
    xy = xy + torch.randn(b, 2, a, generator=gen) * wh * 0.08
    wh = wh * (1 + torch.randn(b, 2, a, generator=gen) * 0.08)
    cls = torch.zeros(b, nc, a)
    for k in range(classes):  # the first classes compete on every box
        cls[:, k] = torch.rand(b, a, generator=gen) * 0.6
    y = torch.cat((xy, wh, cls), 1)
    if nms_impl == "matrix":  # the layout this case is meant to exercise
        best, c = y[:, 4:].max(1)
        bi, ai = (best > 0.25).nonzero(as_tuple=True)
        _, _, _, same = nms_mod.nms_layout(bi, c[bi, ai], b, nc, agnostic)
        assert same == (classes == 3 and not agnostic)
    ours = pipe.postprocess(y, (320, 320))
    ref = nms.non_max_suppression(y.clone(), 0.25, 0.7, None, agnostic, max_det=10_000)
    for img, (o, r) in enumerate(zip(ours, ref, strict=True)):
        assert 20 < len(o) < 1500  # suppression happened, and not of everything
        # exact: torchvision's nms on each (image, class) group's own fp32 boxes
        exact = _greedy_per_group(y[img], 0.25, 0.7, agnostic)
        exact[:, :4] = ops.scale_boxes((320, 320), exact[:, :4], (320, 320))  # clips, as ours
        torch.testing.assert_close(o, exact)
        r[:, :4] = ops.scale_boxes((320, 320), r[:, :4], (320, 320))
        if classes == 3:  # ultralytics' class offsets (c * 7680 in fp32) stay exact
            torch.testing.assert_close(o, r)
        else:  # offsets up to 39 * 7680 round its coordinates: a near-tie may flip
            assert abs(len(o) - len(r)) <= 0.01 * len(r)
            assert match_boxes(o.numpy(), r.numpy(), iou_min=0.999) >= 0.99


def _clustered(seed: int, b: int, a: int, nc: int, objects: int = 8, classes: int = 3):
    """A decoded batch (B, 4 + nc, A) as a detector makes it: ``objects`` objects per image,
    each with many jittered boxes of ``classes`` competing classes."""
    gen = torch.Generator().manual_seed(seed)
    obj = torch.randint(0, objects, (b, a), generator=gen)
    centre = torch.rand(b, 2, objects, generator=gen) * 260 + 30
    size = torch.rand(b, 2, objects, generator=gen) * 60 + 20
    xy = torch.gather(centre, 2, obj[:, None].expand(b, 2, a))
    wh = torch.gather(size, 2, obj[:, None].expand(b, 2, a))
    xy = xy + torch.randn(b, 2, a, generator=gen) * wh * 0.08
    wh = wh * (1 + torch.randn(b, 2, a, generator=gen) * 0.08)
    cls = torch.zeros(b, nc, a)
    for k in range(classes):
        cls[:, k] = torch.rand(b, a, generator=gen) * 0.6
    return torch.cat((xy, wh, cls), 1)


@pytest.mark.parametrize("agnostic", [False, True])
@pytest.mark.parametrize(
    "topk, max_det, deferred",
    [
        (4096, 10_000, False),  # every candidate fits in the k: exact
        (64, 5, False),  # truncated, but max_det of the k best are kept
        (64, 100, True),  # truncated (k = max_det) and fewer than max_det kept: deferred
    ],
)
def test_topk_nms_gives_the_full_nms_boxes_or_defers(
    detector, monkeypatch, agnostic, topk, max_det, deferred
):
    """The fixed-size NMS on each image's k best candidates returns the full NMS's boxes (the
    same rows in the same order), or hands the batch to the full NMS where it cannot be sure:
    an image truncated to its k best whose kept boxes do not reach max_det."""
    from yolo_sm.core import pipeline

    y = _clustered(2, 3, 2100, detector.det.model[-1].nc)
    y[1, 4:] *= 0.2  # image 1: no candidate at all
    full = _postprocessor(detector, PipelineConfig(max_det=max_det, agnostic=agnostic), monkeypatch)
    ref = full.postprocess(y, (480, 640))
    calls = []
    real = pipeline.batch_nms
    monkeypatch.setattr(pipeline, "batch_nms", lambda *a, **k: calls.append(1) or real(*a, **k))
    cfg = PipelineConfig(max_det=max_det, agnostic=agnostic, nms_topk=topk)
    pipe = _postprocessor(detector, cfg, monkeypatch)
    ours = pipe.postprocess(y, (480, 640))
    assert bool(calls) == deferred
    assert len(ref[0]) >= 5 and len(ref[1]) == 0
    for o, r in zip(ours, ref, strict=True):
        assert o.dtype == r.dtype and o.shape == r.shape
        torch.testing.assert_close(o, r, rtol=0, atol=0)
    assert pipe.counts == full.counts  # frames, candidates, boxes: counted once


def test_topk_nms_exactness_flags_and_ties():
    """nms_topk's ``exact`` per image: an image with at most k candidates, or one whose k best
    hold max_det kept boxes; equal scores are taken, and cut, in anchor order, as the full NMS
    orders them."""
    from yolo_sm.core.nms import nms_topk

    a = 12
    # image 0: 12 disjoint boxes, scores 0.9 .. 0.35 (all kept); image 1: 3 candidates
    x = torch.arange(a, dtype=torch.float32) * 50 + 20
    one = torch.ones_like(x)
    xywh = torch.stack((x, 20 * one, 10 * one, 10 * one))
    sc0 = torch.linspace(0.9, 0.35, a)
    sc1 = torch.tensor([0.9, 0.8, 0.7] + [0.1] * (a - 3))
    y = torch.stack((torch.cat((xywh, sc0[None])), torch.cat((xywh, sc1[None]))))  # nc = 1
    dets, counts, exact, cand = nms_topk(y, 0.25, 0.7, max_det=3, k=4, agnostic=False)
    assert cand.tolist() == [12, 3] and counts.tolist() == [3, 3]
    assert exact.tolist() == [True, True]
    torch.testing.assert_close(dets[0, :, 4], sc0[:3])
    assert dets[1, :, 4].tolist() == pytest.approx([0.9, 0.8, 0.7])
    # box 1 overlaps box 0 (suppressed): only 3 of image 0's 4 best are kept, fewer than 4
    over = y.clone()
    over[0, 0, 1] = over[0, 0, 0] + 1
    dets, counts, exact, _ = nms_topk(over, 0.25, 0.7, max_det=4, k=4, agnostic=False)
    assert counts.tolist() == [3, 3] and exact.tolist() == [False, True]
    # equal scores everywhere: the first anchors, in anchor order, and exact
    flat = y.clone()
    flat[:, 4] = 0.5
    dets, counts, exact, _ = nms_topk(flat, 0.25, 0.7, max_det=3, k=5, agnostic=False)
    assert exact.tolist() == [True, True]
    torch.testing.assert_close(dets[:, :, 0], (x[:3] - 5).expand(2, 3))


def test_suppress_steps_say_whether_the_fixed_point_settled():
    """suppress_steps (torch ops) runs a fixed number of steps with no host check: a group whose
    suppression chain needs more is reported unsettled, the others settled at greedy NMS's
    mask; nms_topk hands an image with such a chain to the full NMS (not exact)."""
    from yolo_sm.core import nms

    n = 40
    S = torch.zeros(2, n, n, dtype=torch.bool)
    S[0, torch.arange(n - 1), torch.arange(1, n)] = True  # group 0: a chain 0 -> 1 -> 2 ...
    S[1, 0, 1:] = True  # group 1: box 0 suppresses all the others (one step)
    valid = torch.ones(2, n, dtype=torch.bool)
    keep, settled = nms.suppress_steps(S, valid, 5)
    assert settled.tolist() == [False, True]
    assert keep[1].tolist() == [True] + [False] * (n - 1)
    keep, settled = nms.suppress_steps(S, valid, n + 1)
    assert settled.tolist() == [True, True]
    assert keep.tolist() == nms.suppress_fixpoint(S, valid).tolist()
    assert keep[0].tolist() == [i % 2 == 0 for i in range(n)]


def test_topk_nms_defers_an_image_whose_fixed_point_has_not_settled(monkeypatch):
    """Boxes in a row, each overlapping the next above the IoU threshold, scores falling along
    the row: a suppression chain as long as the row, deeper than TOPK_STEPS."""
    from yolo_sm.core import nms

    a = 40
    x = torch.arange(a, dtype=torch.float32) * 1.0 + 20  # 1 px apart: IoU 0.82 with the next
    one = torch.ones_like(x)
    xywh = torch.stack((x, 20 * one, 10 * one, 10 * one))
    sc = torch.linspace(0.9, 0.5, a)
    y = torch.cat((xywh, sc[None]))[None]  # one image, nc = 1
    _, counts, exact, _ = nms.nms_topk(y, 0.25, 0.7, max_det=300, k=300, agnostic=False)
    assert exact.tolist() == [False]
    monkeypatch.setattr(nms, "TOPK_STEPS", a + 1)
    dets, counts, exact, _ = nms.nms_topk(y, 0.25, 0.7, max_det=300, k=300, agnostic=False)
    assert exact.tolist() == [True]
    # IoU with the next box 0.82, with the one after 0.67 (< 0.7): every other box is kept
    torch.testing.assert_close(dets[0, : counts[0], 0], x[::2] - 5)


def _greedy_per_group(y, conf, iou, agnostic):
    """Reference NMS for one image's (4 + nc, A) decoded output: best class per anchor, score
    threshold, torchvision's nms per class (or once, agnostic) on unshifted fp32 boxes; rows x1
    y1 x2 y2 score class in decreasing score order."""
    from torchvision.ops import nms
    from ultralytics.utils import ops

    score, cls = y[4:].max(0)
    k = score > conf
    boxes, score, cls = ops.xywh2xyxy(y[:4].T[k]), score[k], cls[k]
    keep = []
    for c in [None] if agnostic else cls.unique().tolist():
        members = torch.arange(len(score)) if c is None else (cls == c).nonzero().flatten()
        keep.append(members[nms(boxes[members], score[members], iou)])
    keep = torch.cat(keep)
    keep = keep[torch.sort(score[keep], descending=True, stable=True).indices]
    return torch.cat((boxes[keep], score[keep, None], cls[keep, None].float()), 1)


@pytest.fixture(scope="module")
def small(frames, detector):
    """A batch-2 fp32 engine at 320 px and two different batches of the bus photo."""
    eng = build_engine(
        detector,
        EngineConfig(
            precision="fp32", layout="nchw", batch=2, imgsz=320, device="cpu", check=False
        ),
    )
    bus = frames[0]
    flipped = np.ascontiguousarray(bus[:, ::-1])
    return eng, np.stack([bus, flipped]), np.stack([flipped, bus[::-1].copy()])


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.dtype == y.dtype == np.float32 and x.shape[1:] == (6,)
        np.testing.assert_array_equal(x, y)


def test_torch_uint8_batch_gives_the_numpy_batch_boxes(detector, small):
    eng, a, _ = small
    pipe = DetectionPipeline(detector, eng, PipelineConfig(conf=0.05))
    ref = pipe(a)
    assert min(len(d) for d in ref) > 20
    _same(pipe(torch.from_numpy(a)), ref)
    _same(pipe(list(a)), ref)
    ro = a.copy()
    ro.flags.writeable = False  # a read-only array (e.g. a memory-mapped camera buffer)
    _same(pipe(ro), ref)
    for bad in (torch.from_numpy(a).float(), torch.from_numpy(a[..., :2].copy())):
        with pytest.raises(UserError, match="uint8"):
            pipe(bad)


def test_streams_on_cpu_run_in_order_with_the_same_boxes(detector, small):
    eng, a, b = small
    seq = [a, b, torch.from_numpy(a), b]
    one = list(DetectionPipeline(detector, eng, PipelineConfig(conf=0.05, streams=1)).run(seq))
    three = list(DetectionPipeline(detector, eng, PipelineConfig(conf=0.05, streams=3)).run(seq))
    assert len(one) == len(three) == 4
    for (t1, r1), (t3, r3) in zip(one, three, strict=True):
        assert t1 > 0 and t3 > 0
        _same(r3, r1)
    _same(one[2][1], one[0][1])
    assert not np.array_equal(one[0][1][0], one[1][1][0])  # the two batches differ


def test_measure_pipeline_returns_what_ran(frames, detector, small):
    eng, _, _ = small
    pipe = DetectionPipeline(detector, eng, PipelineConfig(streams=3))
    st = measure_pipeline(pipe, [frames[0]], batch=2, seconds=0.2, pinned=True)
    assert set(st) == {
        "frames",
        "batch",
        "seconds",
        "frames_per_s",
        "latency_p50_ms",
        "latency_p99_ms",
        "streams",
        "pinned",
        "candidates_per_frame",
        "boxes_per_frame",
    }
    assert st["pinned"] is False  # nothing is pinned on a CPU
    assert st["streams"] == 3 and st["batch"] == 2
    assert st["frames"] >= 2 and st["frames"] % 2 == 0 and st["seconds"] >= 0.2
    assert abs(st["frames_per_s"] - st["frames"] / st["seconds"]) < 1e-9
    assert st["latency_p99_ms"] >= st["latency_p50_ms"] > 0
    with pytest.raises(UserError, match="positive batch"):
        measure_pipeline(pipe, [frames[0]], batch=0)


class _FakeCuda:
    """Stand-ins for torch.cuda's streams and events that log what the pipeline queues on which
    stream, so the GPU path's ordering is checked on a CPU (tensors stay on the CPU)."""

    def __init__(self):
        self.log, self.n_streams, self.n_events = [], 0, 0
        self.default = self.Stream()
        self.current = [self.default]

    def Stream(self, device=None, priority=0):  # noqa: N802 - torch.cuda.Stream
        fake = self

        class Stream:
            name = f"s{self.n_streams}"

            def wait_event(self, ev):
                fake.log.append(("wait_event", self.name, ev.name))

            def wait_stream(self, other):
                fake.log.append(("wait_stream", self.name, other.name))

        self.n_streams += 1
        return Stream()

    def Event(self, **kw):  # noqa: N802 - torch.cuda.Event
        fake = self

        class Event:
            name = f"e{self.n_events}"

            def record(self, stream=None):
                fake.log.append(("record", (stream or fake.current[-1]).name, self.name))

            def synchronize(self):
                fake.log.append(("sync", None, self.name))

        self.n_events += 1
        return Event()

    @contextlib.contextmanager
    def stream(self, s):
        self.current.append(s)
        try:
            yield
        finally:
            self.current.pop()

    def current_stream(self, device=None):
        return self.current[-1]

    def stage(self, what, fn):
        def run(*args, **kw):
            self.log.append((what, self.current[-1].name, None))
            return fn(*args, **kw)

        return run


@pytest.mark.parametrize("streams", [1, 3])
def test_gpu_path_queues_each_stage_on_its_stream(monkeypatch, detector, small, streams):
    """The GPU code path, run on a CPU with logging stand-ins for streams and events: batches
    come back equal to the CPU path's; ``streams`` batches are submitted before the oldest is
    finished; copy + letterbox on the slot's copy stream, engine and decode (adjacent) on the
    compute stream after that copy's event, post-processing on its own stream after that batch's
    ready event only; cross-stream tensors recorded on their consumer stream; numpy batches
    staged through the slot's pinned buffer after its copy event, pinned tensors not."""
    import yolo_sm.core.pipeline as pl

    eng, a, b = small
    cfg = PipelineConfig(conf=0.05, streams=streams)
    seq = [a, torch.from_numpy(b), a, b, torch.from_numpy(a)]
    ref = [r for _, r in DetectionPipeline(detector, eng, cfg).run(seq)]

    fake = _FakeCuda()
    for name in ("Stream", "Event", "stream", "current_stream"):
        monkeypatch.setattr(torch.cuda, name, getattr(fake, name))
    monkeypatch.setattr(
        torch.Tensor,
        "record_stream",
        lambda t, s: fake.log.append(("record_stream", s.name, tuple(t.shape))),
    )
    pinned = {seq[1].data_ptr(), seq[4].data_ptr()}
    monkeypatch.setattr(torch.Tensor, "is_pinned", lambda t: t.data_ptr() in pinned)
    buffers = []
    monkeypatch.setattr(
        pl,
        "_pinned_empty",
        lambda shape: buffers.append(shape) or torch.empty(shape, dtype=torch.uint8),
    )
    pipe = DetectionPipeline(detector, eng, cfg)
    pipe._on_gpu = True  # the GPU path, on CPU tensors
    for stage in ("preprocess", "decode", "postprocess"):
        setattr(pipe, stage, fake.stage(stage, getattr(pipe, stage)))
    monkeypatch.setattr(eng, "run", fake.stage("engine", eng.run))
    got = [r for _, r in pipe.run(seq)]
    assert len(got) == len(ref)
    for g, r in zip(got, ref, strict=True):
        _same(g, r)

    log, compute, post = fake.log, pipe._compute.name, pipe._post.name
    copy = [pipe._slots[i % streams].stream.name for i in range(len(seq))]
    assert len({compute, post, *copy, fake.default.name}) == 3 + min(streams, len(seq))
    stages = [(k, s) for k, s, _ in log if k in ("preprocess", "engine", "decode", "postprocess")]
    # submission order: k batches in flight before the oldest is post-processed
    order = [k[0] for k, _ in stages if k != "decode" and k != "preprocess"]
    n = len(seq)
    want = ["e"] * min(streams, n)
    for i in range(n):
        want += ["p"] + (["e"] if i + streams < n else [])
    assert order == want
    batch_of = {"preprocess": 0, "engine": 0, "decode": 0, "postprocess": 0}
    where = {}
    for idx, (k, s, _) in enumerate(log):
        if k in batch_of:
            where[(k, batch_of[k])] = (idx, s)
            batch_of[k] += 1
    recorded = {e: (idx, s) for idx, (k, s, e) in enumerate(log) if k == "record"}
    for i in range(n):
        pre, eng_i, dec, pp = (
            where[(k, i)] for k in ("preprocess", "engine", "decode", "postprocess")
        )
        assert pre[1] == copy[i] and eng_i[1] == dec[1] == compute and pp[1] == post
        assert dec[0] == eng_i[0] + 1  # decode queued right after the engine, same stream
        # compute waited for an event recorded on this batch's copy stream after its letterbox
        waits = [log[j] for j in range(pre[0], eng_i[0]) if log[j][:2] == ("wait_event", compute)]
        assert len(waits) == 1
        ev_idx, ev_stream = recorded[waits[0][2]]
        assert ev_stream == copy[i] and pre[0] < ev_idx < eng_i[0]
        # post waited for this batch's ready event (recorded on compute after its decode) only
        prev_pp = where[("postprocess", i - 1)][0] if i else 0
        pwaits = [log[j] for j in range(prev_pp, pp[0]) if log[j][:2] == ("wait_event", post)]
        assert len(pwaits) == 1
        ev_idx, ev_stream = recorded[pwaits[0][2]]
        assert ev_stream == compute and dec[0] < ev_idx
        nxt = [where[("engine", i + 1)][0]] if i + 1 < n else []
        assert all(ev_idx < j for j in nxt)  # recorded before the next batch's engine
    rs = [(s, shape) for k, s, shape in log if k == "record_stream"]
    assert rs.count((compute, (2, 3, 320, 320))) == n  # letterboxed input -> compute
    assert sum(1 for s, shape in rs if s == post and shape[:2] == (2, 4 + pipe.nc)) == n
    # numpy batches (0, 2, 3) staged through their slot's pinned buffer, one per slot used
    assert buffers == [a.shape] * len({copy[0], copy[2], copy[3]})
    syncs = [e for k, _, e in log if k == "sync"]
    assert syncs == [pipe._slots[i % streams].copied.name for i in (0, 2, 3)]
    # the run waited on the caller's stream first (each slot's stream too, when it was made)
    # and made it wait for compute and every slot's stream at the end
    assert log[0] == ("wait_stream", compute, fake.default.name)
    made = [e for k, s, e in log if k == "wait_stream" and s in copy]
    assert made == [fake.default.name] * len(pipe._slots)
    slots = [s.stream.name for s in pipe._slots.values()]
    tail = [("wait_stream", fake.default.name, s) for s in (compute, *slots)]
    assert log[-len(tail) :] == tail


def _run_interpreted(script: str, *argv) -> dict:
    """Run ``script`` in a Python process of its own with Triton's interpreter on (it must be
    on before Triton is imported: in this process, jitted helpers such as ``tl.max`` fail under
    it); the script prints one JSON line last, returned parsed."""
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ, TRITON_INTERPRET="1")
    r = subprocess.run(
        [sys.executable, "-c", script, *map(str, argv)],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("width", [1, 70, 131])
def test_the_fixed_point_is_greedy_nms(width):
    """suppress_fixpoint (torch ops) keeps what greedy NMS by hand keeps on overlap matrices
    with a long suppression chain (each box suppressed only by one that is itself suppressed)
    and padding; suppress_steps does with enough steps, and says when it has not settled."""
    from yolo_sm.core import nms

    gen = torch.Generator().manual_seed(width)
    g = 3
    upper = torch.ones(width, width, dtype=torch.bool).triu(1)
    S = (torch.rand(g, width, width, generator=gen) < 4.0 / width) & upper
    S[0] = False
    for k in range(width - 1):  # group 0: one chain 0 -> 1 -> 2 -> ..., it alternates
        S[0, k, k + 1] = True
    valid = torch.rand(g, width, generator=gen) > 0.1
    valid[0] = True
    S &= valid[:, :, None]
    greedy = []
    for gi in range(g):
        kp = []
        for i in range(width):
            kp.append(bool(valid[gi, i]) and not any(kp[j] and S[gi, j, i] for j in range(i)))
        greedy.append(kp)
    assert greedy[0] == [i % 2 == 0 for i in range(width)]
    assert nms.suppress_fixpoint(S, valid).tolist() == greedy
    keep, settled = nms.suppress_steps(S, valid, width + 1)
    assert keep.tolist() == greedy and bool(settled.all())
    assert bool(nms.suppress_steps(S, valid, 2)[1][0]) == (width <= 2)


_WALK_CHECK = r"""
import json, sys, warnings, numpy as np, torch
warnings.simplefilter("error")  # a kernel that fails and falls back to the torch ops
np.seterr(invalid="ignore")  # 0 / 0 in the padding lanes, as in torch
from yolo_sm.core import nms


def check(width, same):
    gen = torch.Generator().manual_seed(width)
    g = 3
    xy = torch.rand(g, width, 2, generator=gen) * 60
    bx = torch.cat((xy, xy + torch.rand(g, width, 2, generator=gen) * 30 + 5), -1)
    # group 0: boxes 1 px apart, each suppressed only by one that is itself suppressed
    x = torch.arange(width, dtype=torch.float32) + 20
    bx[0] = torch.stack((x - 5, 15 + 0 * x, x + 5, 25 + 0 * x), -1)
    valid = torch.rand(g, width, generator=gen) > 0.1
    valid[0] = True
    cls = torch.randint(0, 2, (g, width), generator=gen) if same else None
    if same:
        cls[0] = 0
    S = nms.overlap_matrix(bx, cls, valid, 0.7)
    bits = nms.overlap_bits(bx, cls, valid, 0.7)
    unpacked = torch.zeros_like(S)
    for i in range(width):
        unpacked[:, :, i] = ((bits[:, :, i // 32] >> (i % 32)) & 1) != 0
    own = torch.arange(width)[:, None] // 32 <= torch.arange(width)[None, :] // 32
    keep, settled = nms.greedy_keep(bx, cls, valid, 0.7)
    greedy = []  # greedy NMS by hand, group by group
    for gi in range(g):
        kp = []
        for i in range(width):
            kp.append(bool(valid[gi, i]) and not any(kp[j] and S[gi, j, i] for j in range(i)))
        greedy.append(kp)
    walk, nms._TRITON_WALK[True] = nms._TRITON_WALK[True], None  # the fallback: fixed-point
    steps, steps_settled = nms.greedy_keep(bx, cls, valid, 0.7)  # steps on the byte matrix
    nms._TRITON_WALK[True] = walk  # the kernels again, for the next case
    return {
        "bits": bool(torch.equal(unpacked & own, S)), "pairs": int(S.sum()), "keep": keep.tolist(),
        "settled": settled.tolist(), "greedy": greedy, "steps": steps.tolist(),
        "steps_settled": steps_settled.tolist(),
    }


print(json.dumps([check(w, s) for w, s in json.loads(sys.argv[1])]))
"""


#: (width, same_class) of the walk's cases, run in one interpreter process
WALK_CASES = [(1, True), (70, True), (70, False), (97, True)]


def test_the_triton_walk_is_greedy_nms():
    """greedy_keep's GPU kernels, run by Triton's interpreter on the CPU: the packed overlap
    bits are overlap_matrix's S from each row's own word on, and the walk keeps what greedy
    NMS by hand keeps, settled, on a suppression chain across several 32-box blocks (the
    fixed-point fallback needs ~width steps for it and says it has not settled), padding, and
    widths that are not a multiple of 32."""
    import json

    from yolo_sm.core import nms

    pytest.importorskip("triton")
    outs = _run_interpreted(_WALK_CHECK, json.dumps(WALK_CASES))
    assert len(outs) == len(WALK_CASES)
    for (width, same_class), out in zip(WALK_CASES, outs, strict=True):
        case = (width, same_class)
        assert out["bits"] and (width == 1 or out["pairs"] > width // 2), case
        assert out["keep"] == out["greedy"] and all(out["settled"]), case
        assert out["greedy"][0] == [i % 2 == 0 for i in range(width)], case  # alternates
        deep = width > nms.TOPK_STEPS + 1
        assert out["steps_settled"][0] == (not deep), case
        assert (out["steps"][0] == out["greedy"][0]) == (not deep), case


_LETTERBOX_CHECK = r"""
import json, warnings, numpy as np, torch
warnings.simplefilter("error")  # a kernel that fails and returns None
np.seterr(all="ignore")  # masked lanes
from yolo_sm.core.pipeline import letterbox_gpu, letterbox_kernel

rng = np.random.default_rng(0)
out = []
for shape in [(108, 81), (72, 128), (64, 64), (10, 300)]:
    img = torch.from_numpy(rng.integers(0, 256, (2, *shape, 3), dtype=np.uint8))
    for dtype, channels_last in ((torch.float32, False), (torch.float16, True)):
        ref = letterbox_gpu(img, 64, dtype, channels_last)
        got = letterbox_kernel(img, 64, dtype, channels_last)
        out.append([got.dtype == ref.dtype, got.stride() == ref.stride(), torch.equal(got, ref)])
print(json.dumps(out))
"""


def test_the_triton_letterbox_equals_the_torch_letterbox():
    """letterbox_kernel, run by Triton's interpreter on the CPU, writes letterbox_gpu's pixels
    exactly (same source index, weights and rounding) in its dtype and layout, for frames
    resized down, up, not at all, and padded on either axis."""
    pytest.importorskip("triton")
    out = _run_interpreted(_LETTERBOX_CHECK)
    assert len(out) == 8 and all(all(case) for case in out), out
