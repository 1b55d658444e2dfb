"""The yolo-sm command line: bad input is one line on stderr and exit code 2; sub-commands work."""

import importlib.util
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from yolo_sm.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
TINY = [
    "--device",
    "cpu",
    "--family",
    "yolov8",
    "--widths",
    "0.0625",
    "--precisions",
    "fp32",
    "--layouts",
    "nchw",
    "--backends",
    "eager",
    "--batches",
    "1",
    "--imgsz",
    "64",
    "--budget-ms",
    "5",
    "--warmup-ms",
    "1",
    "--quiet",
]

NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
NO_TRT = pytest.mark.skipif(
    importlib.util.find_spec("tensorrt") is not None, reason="needs a machine without TensorRT"
)


def sweep_args(*extra, out="out.parquet"):
    """A tiny valid CPU sweep with ``extra`` flags appended (later flags win)."""
    args = ["sweep", *TINY, *extra]
    return args + ["--out", out] if out else args


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


# Each case: a function of tmp_path returning argv. Relative --out paths are made absolute.
BAD = {
    "negative width": lambda t: sweep_args("--widths=-1"),
    "zero width": lambda t: sweep_args("--widths", "0"),
    "width too small": lambda t: sweep_args("--widths", "0.01"),
    "width not a number": lambda t: sweep_args("--widths", "wide"),
    "zero batch": lambda t: sweep_args("--batches", "0"),
    "negative batch": lambda t: sweep_args("--batches=-2"),
    "fractional batch": lambda t: sweep_args("--batches", "1.5"),
    "imgsz not /32": lambda t: sweep_args("--imgsz", "65"),
    "unknown family": lambda t: sweep_args("--family", "yolov5"),
    "unknown precision": lambda t: sweep_args("--precisions", "fp4"),
    "unknown backend": lambda t: sweep_args("--backends", "tflite"),
    "unknown layout": lambda t: sweep_args("--layouts", "nwhc"),
    "unknown device": lambda t: sweep_args("--device", "tpu"),
    "zero budget": lambda t: sweep_args("--budget-ms", "0"),
    "unknown compile mode": lambda t: sweep_args("--compile-mode", "fastest"),
    "out parent is a file": lambda t: sweep_args(out=str(t / "afile" / "x.parquet")),
    "out is a directory": lambda t: sweep_args(out=str(t / "adir")),
    "cudagraph on cpu": lambda t: sweep_args("--backends", "cudagraph"),
    "no runnable point": lambda t: sweep_args("--backends", "onnxruntime", "--precisions", "fp16"),
    "missing config": lambda t: sweep_args("--config", str(t / "nope.yaml")),
    "malformed yaml": lambda t: sweep_args("--config", write(t, "bad.yaml", "widths: [0.25,\n")),
    "config is a list": lambda t: sweep_args("--config", write(t, "list.yaml", "- a\n- b\n")),
    "config unknown key": lambda t: sweep_args("--config", write(t, "k.yaml", "widht: 0.25\n")),
    "config bad value": lambda t: sweep_args("--config", write(t, "v.yaml", "depth: deep\n")),
    "missing out": lambda t: sweep_args(out=None),
    "unknown flag": lambda t: sweep_args("--bogus", "1"),
    "flag without value": lambda t: sweep_args("--batches"),
    "no sub-command": lambda t: [],
    "unknown sub-command": lambda t: ["frobnicate"],
    "models bad width": lambda t: ["models", "--width", "0"],
    "models unknown preset": lambda t: ["models", "--width", "q"],
    "models bad resnet": lambda t: ["models", "--family", "resnet42"],
    "models resnet name": lambda t: ["models", "--family", "resnetx"],
    "models wide width": lambda t: ["models", "--family", "wide", "--width", "s"],
    "models bad imgsz": lambda t: ["models", "--width", "0.0625", "--imgsz", "65"],
    "models bad format": lambda t: ["models", "--format", "xml"],
    "bench unknown compile mode": lambda t: [
        "bench",
        "--device",
        "cpu",
        "--engines",
        "compile:fastest/fp16/nhwc",
        "--out",
        "b.parquet",
    ],
    "bench mode on eager": lambda t: [
        "bench",
        "--device",
        "cpu",
        "--engines",
        "eager:x/fp16/nhwc",
        "--out",
        "b.parquet",
    ],
    "profile on cpu": lambda t: ["profile", "--device", "cpu", "--out", "prof"],
    "profile bad widths": lambda t: ["profile", "--widths", "a,b", "--device", "cpu", "--out", "p"],
    "profile zero width": lambda t: ["profile", "--widths", "0", "--device", "cpu", "--out", "p"],
    "gpm on cpu": lambda t: ["gpm", "--device", "cpu", "--out", "g.parquet"],
    "gpm without out": lambda t: ["gpm", "--device", "cpu"],
    "profile without gpu": pytest.param(lambda t: ["profile", "--out", "prof"], marks=NO_GPU),
    "gpm without gpu": pytest.param(lambda t: ["gpm", "--out", "g.parquet"], marks=NO_GPU),
    "cuda without gpu": pytest.param(lambda t: sweep_args("--device", "cuda"), marks=NO_GPU),
    "cuda:1 without gpu": pytest.param(lambda t: sweep_args("--device", "cuda:1"), marks=NO_GPU),
    "tensorrt missing": pytest.param(
        lambda t: sweep_args("--backends", "tensorrt", "--precisions", "fp16", "--layouts", "nhwc"),
        marks=NO_TRT,
    ),
}


def _prepare(tmp_path, make):
    (tmp_path / "afile").write_text("a file, not a folder")
    (tmp_path / "adir").mkdir()
    argv = make(tmp_path)
    if "--out" in argv:
        i = argv.index("--out") + 1
        if not os.path.isabs(argv[i]):
            argv[i] = str(tmp_path / argv[i])
    return argv


def _tree(path: Path):
    return sorted((str(p.relative_to(path)), p.is_dir()) for p in path.rglob("*"))


@pytest.mark.parametrize("make", list(BAD.values()), ids=list(BAD))
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, make):
    argv = _prepare(tmp_path, make)
    before = _tree(tmp_path)
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 2
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("yolo-sm: error: ") and len(lines[0]) > len("yolo-sm: error: ") + 5
    assert "Traceback" not in err
    assert out == ""
    assert _tree(tmp_path) == before  # no output (or probe) file created


@pytest.mark.parametrize(
    "make",
    [BAD["negative width"], BAD["malformed yaml"], BAD["out parent is a file"]],
    ids=["negative width", "malformed yaml", "out parent is a file"],
)
def test_bad_input_real_process(tmp_path, make):
    argv = _prepare(tmp_path, make)
    before = _tree(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run(
        [sys.executable, "-m", "yolo_sm", *argv],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2
    assert len(res.stderr.splitlines()) == 1, res.stderr
    assert res.stderr.startswith("yolo-sm: error: ")
    assert "Traceback" not in res.stderr
    assert res.stdout == ""
    assert _tree(tmp_path) == before


def test_error_messages_say_what_is_wrong(tmp_path, capsys):
    cases = [
        (sweep_args("--widths=-1", out=str(tmp_path / "o.parquet")), "width"),
        (sweep_args("--family", "yolov5", out=str(tmp_path / "o.parquet")), "yolov5"),
        (sweep_args(out=str(tmp_path)), "is a directory"),
        (
            sweep_args("--config", str(tmp_path / "nope.yaml"), out=str(tmp_path / "o.parquet")),
            "does not exist",
        ),
        (sweep_args(out=None), "--out"),
    ]
    for argv, needle in cases:
        assert main(argv) == 2
        assert needle in capsys.readouterr().err


# --- models and env -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "family, width, rows",
    [
        ("yolov8", "0.25", 23),
        ("yolo11", "0.25", 24),
        ("wide", "1.25", 8),
        ("resnet18", "1.0", 6),
    ],
)
def test_models_csv(capsys, family, width, rows):
    rc = main(["models", "--family", family, "--width", width, "--format", "csv"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    df = pd.read_csv(io.StringIO(out))
    assert {"index", "layer", "module_type", "stage"} <= set(df.columns)
    assert list(df.columns[:4]) == ["index", "layer", "module_type", "stage"]
    assert len(df) == rows
    assert df.flops.sum() > 0


def test_models_table_and_json(capsys):
    assert main(["models", "--family", "yolov8", "--width", "0.25", "--imgsz", "320"]) == 0
    out = capsys.readouterr().out
    assert "C2f" in out and "GFLOPs per 320x320 image" in out
    assert main(["models", "--width", "0.25", "--format", "json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert len(records) == 23 and records[-1]["stage"] == "head"


def test_env_json(capsys):
    assert main(["env", "--json", "--device", "cpu"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert {"torch", "backend_tensorrt", "profiler_ncu", "backend_eager"} <= set(info)
    assert info["torch"] == torch.__version__
    assert info["backend_eager"] == "yes"


def test_env_table(capsys):
    assert main(["env", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert any(line.startswith("torch ") for line in out.splitlines())


# --- sweep --------------------------------------------------------------------------------


def test_sweep_from_config_and_flag_overrides(tmp_path, capsys):
    cfg = write(
        tmp_path,
        "sweep.yaml",
        f"""
family: yolov8
widths: [0.0625]
precisions: fp32
layouts: [nchw]
backends: eager
batches: [1, 2]
imgsz: 64
budget_ms: 5
warmup_ms: 1
device: cpu
out: {tmp_path / "from_config.parquet"}
""",
    )
    # flags override the config: one batch, another output file
    rc = main(
        [
            "sweep",
            "--config",
            cfg,
            "--batches",
            "2",
            "--out",
            str(tmp_path / "flag.parquet"),
            "--quiet",
        ]
    )
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert not (tmp_path / "from_config.parquet").exists()
    df = pd.read_parquet(tmp_path / "flag.parquet")
    assert df.batch.tolist() == [2] and (df.status == "ok").all()
    assert "points: 1 timed" in out
    # the config alone: its batches and its out
    assert main(["sweep", "--config", cfg, "--quiet"]) == 0
    df = pd.read_parquet(tmp_path / "from_config.parquet")
    assert sorted(df.batch) == [1, 2]
    assert set(df.imgsz) == {64} and set(df.width) == {0.0625} and set(df.device) == {"cpu"}
    assert "points: 2 timed" in capsys.readouterr().out


def test_sweep_skip_notices_go_to_stderr(tmp_path, capsys):
    out_file = tmp_path / "s.parquet"
    rc = main(
        sweep_args(
            "--backends", "eager,onnxruntime", "--precisions", "fp32,bf16", out=str(out_file)
        )
    )
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert err.splitlines() == [
        "yolo-sm: skipping onnxruntime/bf16/nchw: onnxruntime runs fp32 only"
    ]
    df = pd.read_parquet(out_file)
    assert sorted(zip(df.backend, df.precision, strict=True)) == [
        ("eager", "bf16"),
        ("eager", "fp32"),
        ("onnxruntime", "fp32"),
    ]


def test_occupancy_what_if_matches_hopper_conv_kernel(capsys):
    from yolo_sm.cli.main import main

    assert (
        main(
            [
                "occupancy",
                "--threads",
                "384",
                "--registers",
                "168",
                "--smem",
                "200K",
                "--grid",
                "1000",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "occupancy_pct                    18.75" in out
    assert "active_blocks_per_sm             1" in out
    assert "waves                            7.576" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["--threads", "2000"],
        ["--threads", "64", "--smem", "lots"],
        ["--threads", "64", "--cc", "4.2"],
    ],
)
def test_occupancy_bad_input_is_one_sentence(capsys, argv):
    from yolo_sm.cli.main import main

    assert main(["occupancy", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("yolo-sm: error:")


def test_trace_on_cpu_writes_trace_and_provenance(tmp_path, capsys):
    from yolo_sm.cli.main import main

    out = tmp_path / "t.json.gz"
    argv = [
        "trace",
        "--device",
        "cpu",
        "--width",
        "0.0625",
        "--imgsz",
        "64",
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
    ]
    assert main(argv) == 0
    assert out.exists() and (tmp_path / "t.json.gz.metadata.json").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["trace", "--device", "cpu", "--out", "t.json"],
        ["ncu", "--device", "cpu", "--out", "n.csv", "--metric-set", "occupancy"],
    ],
)
def test_profiler_commands_fail_in_one_sentence(tmp_path, monkeypatch, capsys, argv):
    from yolo_sm.cli.main import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("YOLO_SM_NCU", str(tmp_path / "no-ncu"))
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("yolo-sm: error:")
    assert not list(tmp_path.iterdir())


def test_collect_status_and_bad_plan(tmp_path, capsys):
    from yolo_sm.cli.main import main

    assert (
        main(["collect", "--plan", "data/plans/full.yaml", "--out", str(tmp_path), "--status"]) == 0
    )
    out = capsys.readouterr().out
    assert "sweep_fp16_nhwc" in out and "missing" in out
    assert "128 of 128 points" in out and " step(s) done, " in out  # an empty folder: all of it
    assert main(["collect", "--plan", str(tmp_path / "none.yaml"), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not exist" in err[0]


def test_collect_without_a_plan_runs_the_quick_plan_from_any_folder(tmp_path, capsys, monkeypatch):
    from yolo_sm.contract import plans

    monkeypatch.chdir(tmp_path)  # found beside the package, not in the working folder
    assert plans.default_plan() == ROOT / "data" / "plans" / "quick.yaml"
    assert main(["collect", "--out", str(tmp_path / "r"), "--status"]) == 0
    out = capsys.readouterr().out
    assert all(s.name in out for s in plans.load_plan(plans.default_plan()).steps)
    assert "sweep_bf16_nhwc" not in out  # a step of the full plan only
    full = main(["collect", "--plan", str(ROOT / "data/plans/full.yaml"), "--out", "f", "--status"])
    assert full == 0 and "sweep_bf16_nhwc" in capsys.readouterr().out
    monkeypatch.setattr(plans, "PLANS_DIR", tmp_path / "nowhere")
    assert main(["collect", "--out", str(tmp_path / "r"), "--status"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--plan" in err[0]
    assert not (tmp_path / "r").exists()


# --- help, version, claims, render, the remeasure gate ------------------------------------


def _python(code: str) -> subprocess.CompletedProcess:
    """``code`` run by this Python in a process of its own, from the repository's root."""
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "argv", [["--help"], ["render", "--help"], ["claims", "--help"], ["claims", "--json"]]
)
def test_help_and_claims_load_no_torch(argv):
    code = (
        "import sys\n"
        "from yolo_sm.cli.main import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit as e:\n"
        "    assert e.code == 0, e.code\n"
        "heavy = ('torch', 'ultralytics', 'tensorrt', 'onnxruntime')\n"
        "print(sorted(k for k in sys.modules if k.split('.')[0] in heavy))\n"
    )
    res = _python(code)
    assert res.returncode == 0, res.stderr
    assert ("usage: yolo-sm" in res.stdout) == ("--help" in argv)
    assert res.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize(
    ("argv", "command"),
    [(["env"], "env"), (["collect", "--plan", "data/plans/full.yaml", "--out", "data/h200",
                          "--status"], "collect")],
)  # fmt: skip
def test_a_command_that_needs_torch_where_it_is_not_installed_says_so(argv, command):
    """In an environment without torch (what ``make report`` builds), a command of the collect
    layer ends in one sentence naming the missing package and its extra, and exit code 2."""
    code = (
        "import sys\n"
        "for name in ('torch', 'torchvision', 'ultralytics'):\n"
        "    sys.modules[name] = None  # import fails as for a package not installed\n"
        "from yolo_sm.cli.main import main\n"
        f"sys.exit(main({argv!r}))\n"
    )
    res = _python(code)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert lines == [
        f"yolo-sm: error: {command} needs torch, which is not installed in this Python "
        "environment; install the collect extra (pip install -e '.[collect]' in the repository; "
        "make setup installs every extra)."
    ]


def test_missing_package_names_only_an_optional_package_that_is_not_installed(monkeypatch):
    from yolo_sm.cli.main import missing_package

    gone = ModuleNotFoundError("No module named 'onnxscript'", name="onnxscript.rewriter")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert missing_package(gone, "bench").startswith("bench needs onnxscript, which is not ")
    assert "the onnx extra (pip install -e '.[onnx]'" in missing_package(gone, None)
    assert missing_package(gone, None).startswith("this command needs onnxscript")
    # a module that is no optional package: the error is a bug, shown whole
    assert missing_package(ModuleNotFoundError("x", name="yolo_sm.nothing"), "env") is None
    assert missing_package(ModuleNotFoundError("x", name=None), "env") is None
    # an optional package that is installed but lacks a part of itself: a broken install
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())
    assert missing_package(gone, "bench") is None


def test_the_optional_modules_map_to_the_extras_that_install_them():
    """Every extra but the developer ones names at least one module, every module's extra is
    one of pyproject.toml's, and a module installed here comes from a distribution its extra
    lists."""
    import importlib.metadata
    import re
    import tomllib

    from yolo_sm.cli.main import OPTIONAL_MODULES

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert set(OPTIONAL_MODULES.values()) == set(extras) - {"lab", "dev"}
    dists = importlib.metadata.packages_distributions()

    def norm(name):
        return re.sub(r"[-_.]+", "-", name).lower()

    checked = 0
    for module, extra in OPTIONAL_MODULES.items():
        if module in dists:
            listed = {norm(re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0]) for r in extras[extra]}
            assert {norm(d) for d in dists[module]} & listed, (module, extra)
            checked += 1
    assert checked >= 10  # this environment has most extras installed


def test_help_lists_every_command_and_version(capsys):
    import yolo_sm
    from yolo_sm.cli.main import build_parser

    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    sub = next(a for a in build_parser()._actions if a.dest == "cmd")
    assert len(sub.choices) >= 14 and all(name in out for name in sub.choices)
    assert all(callable(p.get_default("run")) for p in sub.choices.values())
    for name in sub.choices:  # every command's help formats (a literal % would raise)
        assert main([name, "--help"]) == 0
        text = capsys.readouterr().out
        assert f"usage: yolo-sm {name}" in text and "--quiet" in text and "--verbose" in text
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"yolo-sm {yolo_sm.__version__}"


def _one_rule_catalog(monkeypatch, value):
    from yolo_sm.analyse.facts import fact, facts_table
    from yolo_sm.report import catalog
    from yolo_sm.report.rules import Rule

    rule = Rule("cli_test", "the test fact stays below ten", "cli_fact", "<", 10.0, unit="ms")

    def facts(root):
        return facts_table([fact("cli_fact", value, "ms")])

    facts.FACT_KEYS = {"cli_fact"}
    monkeypatch.setattr(catalog, "SOURCES", [((rule,), facts)])


@pytest.mark.parametrize("value, verdict", [(3.0, "holds"), (30.0, "does not hold")])
def test_claims_prints_the_verdicts(monkeypatch, capsys, value, verdict):
    _one_rule_catalog(monkeypatch, value)
    assert main(["claims", "--data", "h200", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["id"], r["verdict"], r["measured"]) for r in rows] == [("cli_test", verdict, value)]
    assert main(["claims"]) == 0
    out = capsys.readouterr().out
    assert "cli_test" in out and verdict in out


def test_claims_unknown_root_is_one_sentence(capsys):
    assert main(["claims", "--data", "no_such_root"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no_such_root" in err[0]
    assert main(["claims", "--data", "h200", "--against", "no_such_root"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no_such_root" in err[0]


def test_claims_against_a_second_root_adds_the_pair_rules(monkeypatch, capsys):
    from yolo_sm.analyse.facts import fact, facts_table
    from yolo_sm.report import catalog
    from yolo_sm.report.rules import Rule

    _one_rule_catalog(monkeypatch, 3.0)
    pair = Rule("cli_pair", "the second root is the first", "cli_pair_fact", ">=", 1.0)
    seen = []

    def facts(a, b):
        seen.append((a.name, b.name))
        return facts_table([fact("cli_pair_fact", float(a.name == b.name))])

    facts.FACT_KEYS = {"cli_pair_fact"}
    monkeypatch.setattr(catalog, "PAIR_SOURCES", [((pair,), facts)])
    assert main(["claims", "--data", "h200", "--json"]) == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == ["cli_test"]
    assert main(["claims", "--data", "h200", "--against", "cpu", "--json"]) == 0
    rows = {r["id"]: r["verdict"] for r in json.loads(capsys.readouterr().out)}
    assert rows == {"cli_test": "holds", "cli_pair": "does not hold"}
    assert seen == [("cpu", "h200")]  # the baseline first


def test_render_passes_the_data_root(monkeypatch, tmp_path, capsys):
    from yolo_sm.report import render

    calls = []

    def fake(notebooks, out, timeout=900, only=None, **kw):
        calls.append((notebooks, out, only, kw))
        return Path(out) / "index.html"

    monkeypatch.setattr(render, "render_site", fake)
    site = str(tmp_path / "site")
    assert main(["render", "--out", site, "--only", "01,02"]) == 0
    assert main(["render", "--out", site, "--data", "h200"]) == 0
    assert calls == [
        ("notebooks", site, ["01", "02"], {}),
        ("notebooks", site, [], {"data": "h200"}),
    ]
    assert main(["render", "--out", site, "--data", "no_such_root"]) == 2
    assert len(calls) == 2  # an unknown root fails before any notebook runs


@pytest.mark.parametrize(
    "ratios, rc", [((1.0, 1.05), 0), ((1.0, 1.3), 1), ((1.0, float("nan")), 1)]
)
def test_remeasure_is_a_gate(monkeypatch, capsys, ratios, rc):
    from yolo_sm.analyse.hostbound import TOLERANCE
    from yolo_sm.topics.compare import collect as remeasure

    def fake(name, n, seed, device, out, progress):
        df = pd.DataFrame({"batch": [1, 8], "ratio": list(ratios), "status": ["ok", "ok"]})
        # the columns remeasure.comparison always writes: the ratio the gate decided on, and on what
        df = df.assign(rule_ratio=df.ratio, rule_metrics="img_per_s")
        df["within_10pct"] = (df.ratio - 1).abs() <= TOLERANCE
        return df

    monkeypatch.setattr(remeasure, "remeasure", fake)
    argv = ["remeasure", "--dataset", "h200/sweep_fp16_nhwc", "--device", "cpu", "--quiet"]
    assert main(argv) == rc
    assert "points within" in capsys.readouterr().out


def test_verbosity_flags_set_what_goes_to_stderr(tmp_path, monkeypatch, capsys):
    """Notes go to stderr through logging (none with -q, debug ones with -v); tables to
    stdout."""
    from yolo_sm.core import sweep as sweep_module

    monkeypatch.setattr(sweep_module, "run_sweep", lambda spec, out, progress=True: pd.DataFrame())
    argv = sweep_args(out=str(tmp_path / "s.parquet"))
    argv.remove("--quiet")
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert out == "no points\n" and err.startswith("yolo-sm: sweep: 1 points into")
    assert main([*argv, "-q"]) == 0
    assert capsys.readouterr().err == ""
    assert main(["occupancy", "--threads", "256", "-v"]) == 0
    out, err = capsys.readouterr()
    assert "occupancy_pct" in out and "threads=256" in err
    assert main(["occupancy", "--threads", "256"]) == 0
    assert capsys.readouterr().err == ""
