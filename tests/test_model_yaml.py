"""Model YAMLs named as ultralytics names them, read as data (no code from the file)."""

import inspect
from pathlib import Path

import pytest

from yolo_sm.cli.main import main
from yolo_sm.contract.errors import UserError
from yolo_sm.core.models import model_yaml
from yolo_sm.core.models.spec import parse_model

ultralytics = pytest.importorskip("ultralytics")
torch = pytest.importorskip("torch")
CFG = Path(ultralytics.__file__).parent / "cfg" / "models"
SHIPPED = sorted(p.name for p in CFG.rglob("*.yaml"))


@pytest.fixture
def no_bias_init(monkeypatch):
    """Detect heads set their bias from a float of the stride: no-op on the meta device."""
    import ultralytics.nn.modules as modules

    for name in dir(modules):
        cls = getattr(modules, name)
        if inspect.isclass(cls) and "bias_init" in vars(cls):
            monkeypatch.setattr(cls, "bias_init", lambda self: None)


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_yaml_builds_and_gives_one_batched_tensor(name, no_bias_init):
    """Each YAML of ultralytics' cfg/models resolves by bare name, passes the checks, builds with
    the class YOLO(name) uses (on the meta device) and gives one tensor whose first dimension is
    the batch: what the sweep's engines and the trace take."""
    from yolo_sm.core.models.yolo import wrap_detection

    d = model_yaml.read(name)
    cls = model_yaml.model_class(d)
    with torch.device("meta"):
        det = cls(d, ch=3, nc=d.get("nc", 80), verbose=False)
        head = type(det.model[-1]).__name__
        out = wrap_detection(det, fuse=False, decode="RTDETR" in head)(torch.zeros(2, 3, 64, 64))
    assert isinstance(out, torch.Tensor) and out.shape[0] == 2, (name, head)


@pytest.mark.parametrize(
    "name, file, scale",
    [
        ("yolo11s-seg.yaml", "yolo11-seg.yaml", "s"),
        ("yolov8n-p2.yaml", "yolov8-p2.yaml", "n"),
        ("rtdetr-l.yaml", "rtdetr-l.yaml", ""),
        ("yolov8x6.yaml", "yolov8-p6.yaml", "x"),
        ("yolo26m-pose.yaml", "yolo26-pose.yaml", "m"),
    ],
)
def test_bare_names_resolve_as_ultralytics_does(name, file, scale):
    from ultralytics.nn.tasks import yaml_model_load

    path, got = model_yaml.locate(name)
    assert path.name == file and got == scale
    d = model_yaml.read(name)
    assert d["scale"] == yaml_model_load(name)["scale"] == scale


def test_scaled_name_beside_its_file_resolves(tmp_path):
    (tmp_path / "yolo11-seg.yaml").write_text((CFG / "11" / "yolo11-seg.yaml").read_text())
    spec = parse_model(str(tmp_path / "yolo11s-seg.yaml"))
    assert spec.kind == "yaml" and model_yaml.read(spec.source)["scale"] == "s"


@pytest.mark.parametrize("name", ["yolo11s-seg.yaml", "rtdetr-l.yaml", "yolov8n-cls.yaml"])
def test_models_command_takes_bare_names(name, capsys):
    assert main(["models", "--model", name, "--imgsz", "128", "--format", "csv", "-q"]) == 0
    assert capsys.readouterr().out.count("\n") > 5


def test_unknown_name_is_one_sentence_listing_what_was_looked_for(capsys):
    assert main(["models", "--model", "yolo99s-seg.yaml"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "yolo99s-seg.yaml or yolo99-seg.yaml" in err and "cfg/models" in err


def _write(tmp_path, **top):
    import yaml

    d = yaml.safe_load((CFG / "v8" / "yolov8.yaml").read_text())
    d.update(top)
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(d))
    return path


def test_planted_activation_runs_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    bad = "__import__('pathlib').Path('pwned').write_text('x') or nn.SiLU()"
    path = _write(tmp_path, activation=bad)
    assert main(["models", "--model", str(path)]) == 2
    assert not (tmp_path / "pwned").exists()
    assert "activation" in capsys.readouterr().err


def test_allowed_activation_is_rebuilt_from_its_parts(tmp_path):
    d = model_yaml.read(str(_write(tmp_path, activation="torch.nn.LeakyReLU(0.1)")))
    assert d["activation"] == "nn.LeakyReLU(0.1)"
    with pytest.raises(UserError):
        model_yaml.activation("nn.LeakyReLU(negative_slope=__import__('os').getpid())", "m")


@pytest.mark.parametrize(
    "module", ["torch_safe_load", "DetectionModel", "eval", "nn.functional", "os.system"]
)
def test_module_names_must_be_layers(tmp_path, module):
    d = _write(tmp_path)
    text = d.read_text().replace("SPPF", module, 1)
    d.write_text(text)
    with pytest.raises(UserError, match="not a layer"):
        model_yaml.read(str(d))


def test_alias_bomb_and_size_are_capped(tmp_path):
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x","x"]']
    for i in range(1, 9):
        lines.append(f"{chr(97 + i)}: &{chr(97 + i)} [{', '.join(['*' + chr(96 + i)] * 10)}]")
    (tmp_path / "bomb.yaml").write_text("\n".join(lines) + "\n")
    with pytest.raises(UserError, match="expands"):
        model_yaml.read(str(tmp_path / "bomb.yaml"))
    (tmp_path / "big.yaml").write_text("# " + "x" * model_yaml.MAX_BYTES)
    with pytest.raises(UserError, match="larger"):
        model_yaml.read(str(tmp_path / "big.yaml"))


def test_models_input_shape_is_the_one_counted(capsys):
    assert main(["models", "--model", "torchvision.models:resnet18", "--input-shape",
                 "3,224,224", "-q"]) == 0  # fmt: skip
    total = capsys.readouterr().out.strip().splitlines()[-1]
    gflops = float(total.split(" GFLOPs")[0].split()[-1])
    assert 3.4 < gflops < 3.8 and "224x224" in total
