"""GPU test of notebook 11's live path (marker ``gpu``): the one-model plan collected into
``<results>/<machine>/<model>/`` and read back by role, its verdicts decided."""

import pytest

pytestmark = pytest.mark.gpu


def test_live_plan_collects_every_role_and_decides_the_rules(tmp_path):
    from yolo_sm.report.rules import NOT_TESTED
    from yolo_sm.topics.your_model import analyse as your_model
    from yolo_sm.topics.your_model import collect as collect_model
    from yolo_sm.topics.your_model import report as findings

    root = collect_model.your_model_root("yolov8_w0.25", results=tmp_path)
    assert root.path.parent.parent == tmp_path.resolve() and root.path.name == "yolov8_w0.25"
    v = your_model.view(root)
    assert v.model == "yolov8_w0.25" and set(v.sources) == set(your_model.ROLES)
    sweep = v.load("sweep")
    assert (sweep.status == "ok").all() and sorted(set(sweep.batch)) == [1, 2, 4, 8, 16, 32, 64]
    ncu = v.load("ncu")
    assert (ncu.layer != "").mean() > 0.9  # kernels attributed to layers
    assert (root.path / "manifest.json").exists()
    t = findings.verdicts(v).set_index("id")
    assert t.verdict["batch_pays"] != NOT_TESTED
    assert t.verdict["your_model_half_idle_warps"] != NOT_TESTED
