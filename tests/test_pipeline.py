"""The end-to-end pipeline on CPU: same geometry and boxes as ultralytics' own predict."""

import numpy as np
import pytest
import torch

from yolo_sm.engines import EngineConfig, build_engine
from yolo_sm.errors import UserError
from yolo_sm.pipeline import (
    DetectionPipeline,
    PipelineConfig,
    letterbox_gpu,
    letterbox_params,
    match_boxes,
    measure_pipeline,
    set_class_prior,
    ultralytics_predict,
)


@pytest.fixture(scope="module")
def frames():
    import cv2

    from yolo_sm.images import bundled_images

    return [cv2.imread(str(p)) for p in bundled_images()]  # 1080x810 bus, 720x1280 zidane


@pytest.fixture(scope="module")
def detector():
    from yolo_sm.models import build_yolo

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
    with pytest.raises(UserError, match="uint8"):
        pipe(np.zeros((1, 32, 32, 3), dtype=np.float32))
    with pytest.raises(UserError, match="stream"):
        DetectionPipeline(detector, eng, PipelineConfig(streams=0))


@pytest.mark.parametrize("agnostic, power", [(False, 8), (True, 8), (False, 1)])
def test_batched_nms_equals_ultralytics_per_image_loop(detector, agnostic, power):
    """The one-shot batched NMS returns what ultralytics' per-image loop returns: same boxes,
    scores and classes in the same order, max_det cut included (images with none, some, and
    more than max_det survivors)."""
    import torchvision  # noqa: F401 - ultralytics then uses torchvision's NMS, as we do
    from ultralytics.utils import nms, ops

    eng = build_engine(
        detector,
        EngineConfig(
            precision="fp32", layout="nchw", batch=1, imgsz=320, device="cpu", check=False
        ),
    )
    cfg = PipelineConfig(max_det=40, agnostic=agnostic)
    pipe = DetectionPipeline(detector, eng, cfg)
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
