"""GPU tests of the activation-memory collectors (marker ``gpu``): the lifetime predictor
against the caching allocator's measured peak, and the pool run in both configurations."""

import pytest
import torch

from yolo_sm.contract.schema import problems
from yolo_sm.topics.memory import analyse as am
from yolo_sm.topics.memory.collect import lifetime_rows, pool_table

pytestmark = pytest.mark.gpu


def test_lifetimes_predict_the_measured_peak_of_width_05():
    df = lifetime_rows("yolov8", 0.5, batch=16, imgsz=640, device="cuda")
    assert not problems(df, "memory_lifetimes")
    p = am.peak_table(df).iloc[0]
    assert p.measured_activation_peak_bytes > 0
    assert p.planned_activation_peak_bytes <= p.eager_activation_peak_bytes
    # the lifetimes alone miss cuDNN workspaces: a loose band on the activation peaks
    assert 0.4 <= p.eager_vs_measured <= 1.3, p.eager_vs_measured
    assert am.level(df, "tensor").transient_bytes.notna().all()
    lay = am.level(df, "layer")
    assert lay.measured_allocated_bytes.notna().all() and (lay.measured_peak_bytes > 0).all()
    peak = p.held_before_bytes + p.measured_activation_peak_bytes
    assert torch.cuda.memory_allocated() < peak  # nothing of it kept


def test_pool_run_returns_rows_for_both_confs():
    df = pool_table(
        ("default", "expandable_segments:True"),
        width=0.5,
        forwards=6,
        batch_min=1,
        batch_max=8,
        imgsz=320,
        device="cuda",
    )
    assert not problems(df, "memory_pool")
    assert df.groupby("alloc_conf").size().to_dict() == {
        "default": 6,
        "expandable_segments:True": 6,
    }
    assert (df.reserved_bytes >= df.allocated_bytes).all() and (df.reserved_bytes > 0).all()
    assert (df.peak_allocated_bytes >= df.allocated_bytes).all()
    s = am.pool_summary(df)
    assert (s.peak_reserved_bytes > 0).all() and (s.img_per_s > 0).all()
