"""Any model where a family and width are accepted: an ultralytics checkpoint saved here and a
``module:function`` model of the user's, through the API, the CLI and a plan; bad input ends
in one sentence and exit 2 with nothing written."""

import json

import pytest
import torch

from yolo_sm.cli.main import main
from yolo_sm.contract.errors import UserError
from yolo_sm.core.models import (
    ModelSpec,
    build,
    build_spec,
    layers,
    load_checkpoint,
    parse_model,
    parse_models,
    read_checkpoint,
    save_checkpoint,
)

USER = "tests.fixtures.user_model:tiny"
TINY = {
    "device": "cpu",
    "precisions": "fp32",
    "layouts": "nchw",
    "batches": "1",
    "imgsz": "64",
    "budget_ms": 20,
    "warmup_ms": 2,
}


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return str(save_checkpoint("yolov8:0.0625", tmp_path_factory.mktemp("c") / "det.pt"))


# --- parsing ---------------------------------------------------------------------------------


def test_parse_model_kinds_and_labels(ckpt, tmp_path):
    assert parse_model("yolov8:0.5") == ModelSpec("family", "yolov8", 0.5, None, "yolov8")
    assert parse_model("yolo11:n").width == "n" and parse_model("resnet101").kind == "family"
    spec = parse_model(ckpt)
    assert (spec.kind, spec.name, spec.text) == ("checkpoint", "det", ckpt)
    named = parse_model(f"My_Det={ckpt}")
    assert named.name == "my-det" and parse_model(named.text) == named
    user = parse_model(USER, "3,64,64")
    assert (user.kind, user.name, user.input_shape, user.imgsz) == (
        "module",
        "tiny",
        (3, 64, 64),
        64,
    )
    assert len(parse_models([f"yolov8:0.25,{ckpt}", USER], "3,64,64")) == 3
    # a file named like a built-in family never takes the family's label
    (tmp_path / "yolov8.yaml").write_text("nc: 1\n")
    assert parse_model(str(tmp_path / "yolov8.yaml")).name == "yolov8-yaml"


@pytest.mark.parametrize(
    "text, shape",
    [
        ("yolov9:0.5", None),
        ("yolov8:9", None),
        ("resnet99", None),
        ("missing/best.pt", None),
        (USER, None),  # a module needs its input shape
        (USER, "3,64"),
        (USER, "1,64,64"),  # the engines feed RGB
        (USER, "3,64,32"),  # ... square images
    ],
)
def test_parse_model_rejects_with_a_user_error(text, shape):
    with pytest.raises(UserError):
        parse_model(text, shape)


# --- checkpoints -----------------------------------------------------------------------------


def test_checkpoint_keeps_its_weights_and_loads_in_ultralytics(ckpt):
    from ultralytics import YOLO

    saved = read_checkpoint(ckpt)["model"]
    ours = load_checkpoint(ckpt, fuse=False).det
    for a, b in zip(saved.modules(), ours.modules(), strict=True):
        if isinstance(a, torch.nn.BatchNorm2d):  # the checkpoint's statistics, not re-calibrated
            assert torch.equal(a.running_mean.float(), b.running_mean)
            assert torch.equal(a.running_var.float(), b.running_var)
    assert type(YOLO(ckpt).model).__name__ == "DetectionModel"
    model = build(ckpt)
    assert [r.name for r in layers(model)] == [f"model.{i}" for i in range(len(saved.model))]
    assert model.meta["width"] == 0.0625 and not any(p.requires_grad for p in model.parameters())


def test_checkpoint_and_user_module_sweep_through_the_api(ckpt, tmp_path):
    from yolo_sm.core.sweep import SweepSpec, run_sweep

    spec = SweepSpec.from_mapping({**TINY, "models": [ckpt, USER], "input_shape": "3,64,64"})
    df = run_sweep(spec, tmp_path / "s.parquet", progress=False)
    assert list(df.status) == ["ok", "ok"], df.message.tolist()
    assert list(df.family) == ["det", "tiny"] and list(df.model) == [ckpt, USER]
    assert not df.bn_calibrated.any() and (df.rel_err < 1e-4).all()
    assert df.width.tolist() == [0.0625, 1.0] and (df.flops_per_img > 0).all()


def _cli(capsys, *argv):
    rc = main(list(argv))
    return rc, capsys.readouterr()


def _traced_layers(path) -> list[dict]:
    """The layer ranges (layer, module_type, stage) a Kineto trace holds."""
    from yolo_sm.core.profiling.kineto import read_trace
    from yolo_sm.core.profiling.nvtx import parse_range

    names = [e.get("name", "") for e in read_trace(path)["traceEvents"]]
    return [d for d in map(parse_range, names) if d]


def test_cli_sweep_takes_model_specs(ckpt, tmp_path, capsys):
    out = tmp_path / "s.parquet"
    flags = [
        "--device",
        "cpu",
        "--precisions",
        "fp32",
        "--layouts",
        "nchw",
        "--batches",
        "1",
        "--imgsz",
        "64",
        "--budget-ms",
        "20",
        "--warmup-ms",
        "2",
        "--quiet",
    ]
    rc, cap = _cli(
        capsys,
        "sweep",
        "--model",
        ckpt,
        "--model",
        USER,
        "--input-shape",
        "3,64,64",
        *flags,
        "--out",
        str(out),
    )
    assert rc == 0, cap.err
    import pandas as pd

    assert set(pd.read_parquet(out).family) == {"det", "tiny"}


def test_cli_models_save_writes_a_checkpoint_the_loader_reads(tmp_path, capsys):
    out = tmp_path / "n.pt"
    rc, cap = _cli(capsys, "models", "save", "--model", "yolov8:0.0625", "--out", str(out))
    assert rc == 0, cap.err
    assert read_checkpoint(out)["yolo_sm"]["spec"] == "yolov8:0.0625"
    rc, cap = _cli(capsys, "models", "--model", str(out), "--imgsz", "64", "--format", "json")
    assert rc == 0 and len(json.loads(cap.out)) == len(layers(build_spec(out)))


@pytest.mark.parametrize("which", ["checkpoint", "module"])
def test_plan_with_a_model_runs_sweep_trace_and_tables(which, ckpt, tmp_path, capsys):
    import pandas as pd
    import yaml

    model = ckpt if which == "checkpoint" else USER
    plan = {
        "name": "mine",
        "device": "cpu",
        "model": model,
        "steps": [
            {
                "name": "sweep",
                "kind": "sweep",
                "out": "sweep.parquet",
                "params": {k: v for k, v in TINY.items() if k != "device"},
            },
            {
                "name": "trace",
                "kind": "trace",
                "out": "trace.parquet",
                "params": {
                    "precisions": "fp32",
                    "layouts": "nchw",
                    "batches": 1,
                    "imgsz": 64,
                    "iters": 1,
                },
            },
            {
                "name": "layers",
                "kind": "model_tables",
                "out": "layers.parquet",
                "params": {"imgsz": 64},
            },
        ],
    }
    if which == "module":
        plan["steps"][0]["params"]["input_shape"] = "3,64,64"
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    root = tmp_path / "root"
    rc, cap = _cli(capsys, "collect", "--plan", str(path), "--out", str(root), "--quiet")
    assert rc == 0, cap.err
    name = "det" if which == "checkpoint" else "tiny"
    assert set(pd.read_parquet(root / "sweep.parquet").family) == {name}
    tables = pd.read_parquet(root / "layers.parquet")
    built = build_spec(model, input_shape="3,64,64" if which == "module" else None)
    names = [r.name for r in layers(built)]
    assert tables.layer.tolist() == names and set(tables.model) == {model}
    # per-layer attribution of the trace (on the CPU: its operators; on a GPU: its kernels)
    (trace,) = (root / "traces").glob("*.json.gz")
    assert {d["layer"] for d in _traced_layers(trace)} == set(names)
    manifest = json.loads((root / "manifest.json").read_text())["datasets"]
    assert (
        manifest["trace"]["params"]["models"] == model and "--model" in manifest["trace"]["command"]
    )
    if which == "checkpoint":  # the your-model notebook on the root this checkpoint's plan made
        pytest.importorskip("nbclient")
        from tests.test_notebooks import NOTEBOOKS, _executes_and_renders, _outputs_text
        from yolo_sm.contract.datasets import open_root

        nb, _ = _executes_and_renders(NOTEBOOKS[0].parent / "11_your_model.ipynb", open_root(root))
        out = _outputs_text(nb)
        assert "det" in out and "holds no sweep table" not in out
        # a CPU trace holds no GPU kernels: its section says so; a GPU's trace draws
        kernels = len(pd.read_parquet(root / "trace.parquet"))
        assert ("holds no trace table" in out) == (kernels == 0)


# --- bad input -------------------------------------------------------------------------------


def _bad_inputs(tmp_path, ckpt):
    not_ckpt = tmp_path / "notes.pt"
    not_ckpt.write_text("not a checkpoint")
    cut = tmp_path / "cut.pt"
    data = open(ckpt, "rb").read()
    cut.write_bytes(data[: len(data) // 2])
    foreign = tmp_path / "foreign.pt"  # pickles a class of another package: never unpickled
    from tests.fixtures.user_model import Tiny

    torch.save({"model": Tiny()}, foreign)
    return {
        "missing": [str(tmp_path / "nope.pt")],
        "not a checkpoint": [str(not_ckpt)],
        "truncated": [str(cut)],
        "foreign objects": [str(foreign)],
        "no such function": ["tests.fixtures.user_model:nothing", "--input-shape", "3,64,64"],
        "no such module": ["tests.fixtures.no_such_module:tiny", "--input-shape", "3,64,64"],
        "not a module": ["tests.fixtures.user_model:not_a_module", "--input-shape", "3,64,64"],
        "shape rejected": ["tests.fixtures.user_model:fixed", "--input-shape", "3,64,64"],
    }


@pytest.mark.parametrize(
    "case",
    [
        "missing",
        "not a checkpoint",
        "truncated",
        "foreign objects",
        "no such function",
        "no such module",
        "not a module",
        "shape rejected",
    ],
)
def test_bad_model_is_one_sentence_exit_2_nothing_written(case, ckpt, tmp_path, capsys):
    model, *rest = _bad_inputs(tmp_path, ckpt)[case]
    out = tmp_path / "out" / "s.parquet"
    rc, cap = _cli(
        capsys,
        "sweep",
        "--model",
        model,
        *rest,
        "--device",
        "cpu",
        "--batches",
        "1",
        "--imgsz",
        "64",
        "--out",
        str(out),
    )
    assert rc == 2 and cap.err.count("\n") == 1 and "Traceback" not in cap.err, cap.err
    assert not out.exists() and not out.parent.exists()


def test_a_checkpoint_holding_a_non_module_is_refused(tmp_path):
    path = tmp_path / "weights.pt"
    torch.save({"model": {"w": torch.zeros(2)}}, path)
    with pytest.raises(UserError, match="no model"):
        load_checkpoint(path)


def test_bench_takes_a_checkpoint_as_it_is(ckpt):
    from yolo_sm.core.bench import BenchSpec, bench_model
    from yolo_sm.core.models import YoloForward

    spec = BenchSpec.from_mapping({"models": f"{ckpt},yolov8:0.5", "device": "cpu"})
    assert spec.models == (("det", 0.0625), ("yolov8", 0.5)) and spec.specs == (("det", ckpt),)
    model = bench_model("det", 0.0625, spec.specs)
    assert isinstance(model, YoloForward)
    head = load_checkpoint(ckpt).det.model[-1]  # no class prior on a checkpoint's head
    assert torch.equal(model.det.model[-1].cv3[0][-1].bias, head.cv3[0][-1].bias)
    user = BenchSpec.from_mapping({"models": USER, "device": "cpu"})
    assert isinstance(bench_model("tiny", 1.0, user.specs), UserError)


def test_cli_trace_of_a_user_module_attributes_its_layers(tmp_path, capsys):
    out = tmp_path / "t.json.gz"
    rc, cap = _cli(
        capsys,
        "trace",
        "--model",
        USER,
        "--input-shape",
        "3,64,64",
        "--device",
        "cpu",
        "--precision",
        "fp32",
        "--layout",
        "nchw",
        "--batch",
        "1",
        "--iters",
        "1",
        "--out",
        str(out),
    )
    assert rc == 0, cap.err
    ranges = _traced_layers(out)
    assert {d["layer"] for d in ranges} == {"stem", "body", "head"}
    assert {d["stage"] for d in ranges} == {"backbone", "head"}


def test_profiling_target_labels_each_model(ckpt, capsys):
    from yolo_sm.contract.labels import parse_config
    from yolo_sm.core.profiling import target

    argv = target.target_argv(
        "yolov8", "1.0", "fp32", "nchw", "1", 64, "cpu", models=[ckpt, USER], input_shape="3,64,64"
    )
    assert target.main(argv[3:]) == 0
    labels = [line.split()[-1] for line in capsys.readouterr().out.splitlines()]
    assert labels == ["det_w0.0625_fp32_nchw_b1", "tiny_w1_fp32_nchw_b1"]
    assert [parse_config(x)["family"] for x in labels] == ["det", "tiny"]


def test_two_files_with_one_label_must_be_named(ckpt, tmp_path):
    from yolo_sm.core.sweep import SweepSpec

    other = tmp_path / "det.pt"
    other.write_bytes(open(ckpt, "rb").read())
    with pytest.raises(UserError, match="LABEL"):
        SweepSpec.from_mapping({**TINY, "models": [ckpt, str(other)]})
    spec = SweepSpec.from_mapping({**TINY, "models": [ckpt, f"det2={other}"]})
    assert sorted({p.family for p in spec.points()}) == ["det", "det2"]
