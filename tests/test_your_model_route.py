"""The your-model route on a CPU: collect --device cpu at the user's input shape, claims on the
roots it makes and on the shipped example."""

import json
from pathlib import Path

import pandas as pd
import pytest

from yolo_sm.cli.main import main

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "resnet18_cpu"


@pytest.mark.parametrize("root", ["examples/yolov8n_calibrated", str(FIXTURE)])
def test_claims_of_a_your_model_root_exit_0(root, capsys):
    assert main(["claims", "--data", root]) == 0
    assert "verdicts:" in capsys.readouterr().out


def test_the_resnet18_fixture_counts_at_its_input_shape():
    layers = pd.read_parquet(FIXTURE / "model_layers.parquet")
    sweep = pd.read_parquet(FIXTURE / "sweep_fp16_nhwc.parquet")
    assert (layers.imgsz == 224).all() and (sweep.imgsz == 224).all()
    assert 3.4e9 < layers.flops.sum() < 3.8e9  # ResNet-18 at 224x224, 2 FLOPs per MAC
    assert (sweep.flops_per_img == layers.flops.sum()).all()
    assert (sweep.prov_device == "cpu").all()


def test_collect_on_the_cpu_at_the_users_input_shape(tmp_path, capsys):
    pytest.importorskip("torch")
    import yaml

    plan = yaml.safe_load(Path("data/plans/checkpoint.yaml").read_text())
    plan["steps"] = [s for s in plan["steps"] if s["kind"] in ("model_tables", "ncu")]
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    root = tmp_path / "root"
    argv = ["collect", "--plan", str(path), "--model", "tests.fixtures.user_model:fixed",
            "--device", "cpu", "--input-shape", "3,32,32", "--out", str(root), "-q"]  # fmt: skip
    assert main(argv) == 0
    assert "ncu_occupancy_b16 skipped" in capsys.readouterr().err  # a GPU's counters: said so
    layers = pd.read_parquet(root / "model_layers.parquet")
    assert (layers.imgsz == 32).all()  # the model takes 32x32 only: the plan's 640 was replaced
    entry = json.loads((root / "manifest.json").read_text())["datasets"]["model_layers"]
    assert "--device cpu --input-shape 3,32,32" in entry["command"]
    assert "32x32" in entry["description"] and "640x640" not in entry["description"]


def test_gpu_commands_do_not_advise_the_cpu(capsys):
    """On a machine without a GPU, gpm and profile say they need one (and refuse cpu) instead
    of advising --device cpu."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    gpm, profile = ["gpm", "--out", "g.parquet"], ["profile", "--out", "p"]
    for argv in (gpm, [*gpm, "--device", "cpu"], profile, [*profile, "--device", "cpu"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "GPU only" in err and "--device cpu" not in err, err
