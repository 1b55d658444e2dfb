"""Bad input, as a careless or hostile user gives it: every case of the table ends in exactly one
line on stderr and exit code 2, with nothing on stdout and no file left in the working folder;
an interrupt exits 130 with what was written kept. The parsers and loaders behind these commands
have hypothesis properties of their own (test_input_properties.py).

The table's ``ONCE_BROKEN`` cases are inputs that once ended in a traceback, exit 0 or a hang;
``FURTHER`` are more of the same families. Each case names a text its error must contain (the flag
or file at fault), so that a case cannot pass by failing for another reason.
"""

from __future__ import annotations

import errno
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from yolo_sm.cli.main import main
from yolo_sm.contract import values
from yolo_sm.contract.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
H200_PLAN = str(ROOT / "data" / "plans" / "full.yaml")
CPU_PLAN = str(ROOT / "data" / "plans" / "cpu.yaml")
NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
NO_TRT = pytest.mark.skipif(
    importlib.util.find_spec("tensorrt") is not None, reason="needs a machine without TensorRT"
)
NOT_ROOT = pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into read-only folders"
)
#: a folder no process can create files in, root included
UNWRITABLE = "/proc/yolo_sm_no_such_folder"
TINY = (
    "--device cpu --family yolov8 --widths 0.0625 --precisions fp32 --layouts nchw "
    "--backends eager --batches 1 --imgsz 64 --budget-ms 5 --warmup-ms 1 --quiet"
).split()


def sweep(*extra, out="s.parquet"):
    """A tiny valid CPU sweep with ``extra`` flags appended (later flags win)."""
    return ["sweep", *TINY, *extra] + (["--out", out] if out else [])


def bench(*extra, out="b.parquet"):
    return ["bench", "--device", "cpu", "--models", "yolov8:0.0625", "--batches", "1"] + [
        "--engines",
        "compile/fp32/nchw",
        "--no-predict",
        "--seconds",
        "0.1",
        *extra,
        "--out",
        out,
    ]


def trace(*extra, out="t.json.gz"):
    return ["trace", "--device", "cpu", "--width", "0.0625", "--imgsz", "64", "--batch", "1"] + [
        "--precision",
        "fp32",
        "--layout",
        "nchw",
        *extra,
        "--out",
        out,
    ]


def occupancy(*extra):
    return ["occupancy", "--threads", "256", "--registers", "32", *extra]


def put(name: str, content) -> str:
    """Write ``content`` (text or bytes) to ``name`` in the working folder; returns the name."""
    p = Path(name)
    p.write_bytes(content if isinstance(content, bytes) else content.encode())
    return name


CONFIG = "device: cpu\nwidths: [0.0625]\nprecisions: fp32\nlayouts: nchw\nbatches: [1]\n"


def plan_text(step: str = "", top: str = "name: t\ndevice: cpu\n") -> str:
    """A valid one-step CPU plan (a tiny sweep), with ``step`` lines added to a second step."""
    first = (
        "  - name: tiny\n    kind: sweep\n    out: tiny.parquet\n"
        "    params: {widths: [0.0625], precisions: [fp32], layouts: [nchw], batches: [1], "
        "imgsz: [64], budget_ms: 5, warmup_ms: 1}\n"
    )
    return top + "steps:\n" + first + step


def plan(step: str = "", top: str = "name: t\ndevice: cpu\n") -> list[str]:
    return ["collect", "--plan", put("plan.yaml", plan_text(step, top)), "--out", "root"]


def last_step(params: str, kind: str = "sweep", extra: str = "") -> list[str]:
    """A plan whose second (last) step has ``params``: a typo there fails before step one."""
    return plan(
        f"  - name: last\n    kind: {kind}\n    out: last.parquet\n{extra}    params: {params}\n"
    )


def run_sweep_then(exc):
    """Patch run_sweep to write one table row through the store and raise ``exc`` (made by
    a function so that each case gets a fresh exception)."""

    def fake(spec, out, progress=True, deadline=None):
        from yolo_sm.contract.store import write_atomic

        write_atomic(pd.DataFrame({"status": ["ok"], "median_ms": [1.0]}), Path(out))
        raise exc()

    return fake


def full_disk(mp):
    """A disk that fills up at the first table write."""
    import pyarrow.parquet as pq

    from yolo_sm.core import sweep as sweep_module

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    mp.setattr(sweep_module, "run_sweep", run_sweep_then(lambda: OSError("unreachable")))
    mp.setattr(pq, "write_table", no_space)
    return sweep()


def permission_denied(mp):
    from yolo_sm.core import sweep as sweep_module

    def fake(spec, out, progress=True, deadline=None):
        raise PermissionError(errno.EACCES, "Permission denied", str(out))

    mp.setattr(sweep_module, "run_sweep", fake)
    return sweep()


def notebooks() -> str:
    Path("nb").mkdir()
    Path("nb/01_topic.ipynb").write_text("{}")
    return "nb"


LONG = "o" * 300
# name: (argv maker taking the monkeypatch, text the one error line must contain)
ONCE_BROKEN = {
    # tracebacks
    "sweep --batches nan": (lambda mp: sweep("--batches", "nan"), "--batches"),
    "sweep --batches inf": (lambda mp: sweep("--batches", "inf"), "--batches"),
    "sweep --batches 1e400": (lambda mp: sweep("--batches", "1e400"), "--batches"),
    "bench --batches nan": (lambda mp: bench("--batches", "nan"), "--batches"),
    "bench --batches 1e400": (lambda mp: bench("--batches", "1e400"), "--batches"),
    "binary config": (
        lambda mp: sweep("--config", put("c.yaml", bytes(range(256)) * 8)),
        "c.yaml",
    ),
    "UTF-16 config": (
        lambda mp: sweep("--config", put("c.yaml", CONFIG.encode("utf-16"))),
        "utf-16",
    ),
    "/proc/self/mem config": (lambda mp: sweep("--config", "/proc/self/mem"), "/proc/self/mem"),
    "binary plan": (
        lambda mp: ["collect", "--plan", put("p.yaml", bytes(range(256)) * 8), "--out", "r"],
        "p.yaml",
    ),
    "UTF-16 plan": (
        lambda mp: ["collect", "--plan", put("p.yaml", plan_text().encode("utf-16")), "--out", "r"],
        "utf-16",
    ),
    "/proc/self/mem plan": (
        lambda mp: ["collect", "--plan", "/proc/self/mem", "--out", "r"],
        "/proc/self/mem",
    ),
    "300-character --out name": (lambda mp: sweep(out=f"{LONG}.parquet"), "characters"),
    "300-character collect --out": (lambda mp: plan()[:-1] + [LONG], "characters"),
    "read-only trace --out": (lambda mp: trace(out=f"{UNWRITABLE}/t.json.gz"), UNWRITABLE),
    "read-only collect --out": (lambda mp: plan()[:-1] + [UNWRITABLE], UNWRITABLE),
    "read-only render --out": (
        lambda mp: ["render", "--notebooks", notebooks(), "--out", UNWRITABLE],
        UNWRITABLE,
    ),
    "plan step name a list": (
        lambda mp: plan("  - name: [a, b]\n    kind: sweep\n    out: x.parquet\n"),
        "name",
    ),
    "plan params a list": (lambda mp: last_step("[1, 2]"), "params"),
    "plan est_s text": (lambda mp: last_step("{}", extra="    est_s: soon\n"), "est_s"),
    "plan kind a number": (
        lambda mp: plan("  - name: x\n    kind: 7\n    out: x.parquet\n"),
        "kind",
    ),
    "plan out a number": (lambda mp: plan("  - name: x\n    kind: sweep\n    out: [1]\n"), "out"),
    "plan device a list": (lambda mp: plan(top="name: t\ndevice: [cpu]\n"), "device"),
    "collect --only ceilings without a GPU": pytest.param(
        lambda mp: ["collect", "--plan", H200_PLAN, "--out", "root", "--only", "ceilings"],
        "cuda",
        marks=NO_GPU,
    ),
    "occupancy --smem nan": (lambda mp: occupancy("--smem", "nan"), "--smem"),
    "occupancy --smem inf": (lambda mp: occupancy("--smem", "inf"), "--smem"),
    "occupancy --grid -5": (lambda mp: occupancy("--grid", "-5"), "--grid"),
    "occupancy --sm-count 0": (lambda mp: occupancy("--sm-count", "0"), "--sm-count"),
    "launch that fits 0 blocks": (
        lambda mp: ["occupancy", "--threads", "1024", "--registers", "255"],
        "no block",
    ),
    "launch that fits 0 blocks, with --grid": (
        lambda mp: ["occupancy", "--threads", "1024", "--registers", "255", "--grid", "100"],
        "no block",
    ),
    "full disk": (full_disk, "no space left"),
    # accepted with exit 0
    "sweep --warmup-ms inf": (lambda mp: sweep("--warmup-ms", "inf"), "--warmup-ms"),
    "sweep --budget-ms inf": (lambda mp: sweep("--budget-ms", "inf"), "--budget-ms"),
    "sweep --device cpux": (lambda mp: sweep("--device", "cpux"), "cpux"),
    "remeasure of CUDA rows without a GPU": pytest.param(
        lambda mp: ["remeasure", "--dataset", "h200/sweep_fp16_nhwc", "--points", "1"],
        "cuda",
        marks=NO_GPU,
    ),
    "bench --engines tensorrt/fp16/nchw": pytest.param(
        lambda mp: bench("--engines", "tensorrt/fp16/nchw"), "tensorrt", marks=NO_TRT
    ),
    "bench --engines tensorrt/int8/nchw": pytest.param(
        lambda mp: bench("--engines", "tensorrt/int8/nchw"), "tensorrt", marks=NO_TRT
    ),
    "trace --iters -1": (lambda mp: trace("--iters", "-1"), "--iters"),
    "occupancy --smem 1.5": (lambda mp: occupancy("--smem", "1.5"), "--smem"),
    "env --device tpu": (lambda mp: ["env", "--device", "tpu"], "tpu"),
    "collect --max-minutes 0": (lambda mp: plan() + ["--max-minutes", "0"], "--max-minutes"),
    "collect --status --max-minutes nan": (
        lambda mp: plan() + ["--status", "--max-minutes", "nan"],
        "--max-minutes",
    ),
    # hangs
    "bench --seconds inf": (lambda mp: bench("--seconds", "inf"), "--seconds"),
    "sweep --warmup-ms 1e12": (lambda mp: sweep("--warmup-ms", "1e12"), "--warmup-ms"),
    # late failures: a typo in the last step
    "typo in the last step's params": (lambda mp: last_step("{widht: 0.5}"), "widht"),
    "bad value in the last step": (lambda mp: last_step("{batches: [1, nan]}"), "batches"),
}
FURTHER = {
    "sweep --budget-ms nan": (lambda mp: sweep("--budget-ms", "nan"), "--budget-ms"),
    "sweep --budget-ms -1": (lambda mp: sweep("--budget-ms=-1"), "--budget-ms"),
    "sweep --budget-ms past its cap": (lambda mp: sweep("--budget-ms", "1e9"), "--budget-ms"),
    "sweep --warmup-ms -1": (lambda mp: sweep("--warmup-ms=-1"), "--warmup-ms"),
    "sweep --warmup-ms nan": (lambda mp: sweep("--warmup-ms", "nan"), "--warmup-ms"),
    "sweep --widths inf": (lambda mp: sweep("--widths", "inf"), "--widths"),
    "sweep --widths nan": (lambda mp: sweep("--widths", "nan"), "--widths"),
    "sweep --widths 1e400": (lambda mp: sweep("--widths", "1e400"), "--widths"),
    "sweep --batches past its cap": (lambda mp: sweep("--batches", "1e9"), "--batches"),
    "sweep --batches true": (lambda mp: sweep("--batches", "true"), "--batches"),
    "sweep --batches 2,,x": (lambda mp: sweep("--batches", "2,,x"), "--batches"),
    "sweep --imgsz 1e400": (lambda mp: sweep("--imgsz", "1e400"), "--imgsz"),
    "sweep --imgsz past its cap": (lambda mp: sweep("--imgsz", "99968"), "--imgsz"),
    "sweep --depth nan": (lambda mp: sweep("--depth", "nan"), "--depth"),
    "sweep --max-channels 0": (lambda mp: sweep("--max-channels", "0"), "--max-channels"),
    "sweep --device cuda:x": (lambda mp: sweep("--device", "cuda:x"), "cuda:x"),
    "sweep --device empty": (lambda mp: sweep("--device", " "), "--device"),
    "sweep --device cuda:7 without that GPU": pytest.param(
        lambda mp: sweep("--device", "cuda:7"), "cuda:7", marks=NO_GPU
    ),
    "sweep --out empty": (lambda mp: sweep(out=" "), "--out"),
    "sweep --out inside a long folder name": (
        lambda mp: sweep(out=f"{'d' * 201}/s.parquet"),
        "characters",
    ),
    "sweep --out unwritable": (lambda mp: sweep(out=f"{UNWRITABLE}/s.parquet"), UNWRITABLE),
    "sweep --out in a read-only folder": pytest.param(
        lambda mp: (Path("ro").mkdir(mode=0o555), sweep(out="ro/s.parquet"))[1],
        "ro",
        marks=NOT_ROOT,
    ),
    "config is a directory": (
        lambda mp: (Path("cdir").mkdir(), sweep("--config", "cdir"))[1],
        "cdir",
    ),
    "config larger than 1 MiB": (
        lambda mp: sweep("--config", put("big.yaml", "# " + "x" * (1 << 20))),
        "big.yaml",
    ),
    "config with NUL bytes": (
        lambda mp: sweep("--config", put("nul.yaml", "widths: [0.25]\x00\n")),
        "nul.yaml",
    ),
    "config with an impossible date": (
        lambda mp: sweep("--config", put("d.yaml", "batches: 2001-02-30\n")),
        "d.yaml",
    ),
    "config nested 700 deep": (
        lambda mp: sweep("--config", put("deep.yaml", "[" * 700 + "]" * 700)),
        "deep.yaml",
    ),
    "config with a number as key": (
        lambda mp: sweep("--config", put("k.yaml", "1: 2\n")),
        "k.yaml",
    ),
    "config budget_ms .inf": (
        lambda mp: [
            "sweep",
            "--config",
            put("i.yaml", CONFIG + "budget_ms: .inf\n"),
            "--out",
            "s.parquet",
        ],
        "budget_ms",
    ),
    "config batches .nan": (
        lambda mp: ["sweep", "--config", put("n.yaml", "batches: [.nan]\n"), "--out", "s.parquet"],
        "batches",
    ),
    "config check maybe": (
        lambda mp: [
            "sweep",
            "--config",
            put("m.yaml", CONFIG + "check: maybe\n"),
            "--out",
            "s.parquet",
        ],
        "check",
    ),
    "config extra a list": (
        lambda mp: [
            "sweep",
            "--config",
            put("e.yaml", CONFIG + "extra: [1]\n"),
            "--out",
            "s.parquet",
        ],
        "extra",
    ),
    "config out a list": (
        lambda mp: ["sweep", "--config", put("o.yaml", CONFIG + "out: [a]\n")],
        "out",
    ),
    "plan unknown top-level key": (lambda mp: plan(top="name: t\ndevcie: cpu\n"), "devcie"),
    "plan device tpu": (lambda mp: plan(top="name: t\ndevice: tpu\n"), "tpu"),
    "plan name a mapping": (lambda mp: plan(top="name: {a: 1}\ndevice: cpu\n"), "name"),
    "plan steps a mapping": (
        lambda mp: ["collect", "--plan", put("p.yaml", "steps: {a: 1}\n"), "--out", "r"],
        "steps",
    ),
    "plan step name with a slash": (
        lambda mp: plan("  - name: a/b\n    kind: sweep\n    out: x.parquet\n"),
        "name",
    ),
    "plan two steps write one file": (
        lambda mp: plan("  - name: again\n    kind: sweep\n    out: tiny.parquet\n"),
        "tiny.parquet",
    ),
    "plan step out outside its folder": (
        lambda mp: plan("  - name: x\n    kind: sweep\n    out: ../x.parquet\n"),
        "out",
    ),
    "plan step out absolute": (
        lambda mp: plan("  - name: x\n    kind: sweep\n    out: /tmp/x.parquet\n"),
        "out",
    ),
    "plan description a list": (
        lambda mp: last_step("{}", extra="    description: [a]\n"),
        "description",
    ),
    "plan est_s negative": (lambda mp: last_step("{}", extra="    est_s: -1\n"), "est_s"),
    "plan ncu metric_set unknown": (lambda mp: last_step("{metric_set: most}", "ncu"), "most"),
    "plan ncu unknown param": (lambda mp: last_step("{metricset: full}", "ncu"), "metricset"),
    "plan trace iters 0": (lambda mp: last_step("{iters: 0}", "trace"), "iters"),
    "plan gpm seconds inf": (lambda mp: last_step("{seconds: .inf}", "gpm"), "seconds"),
    "plan ceilings n nan": (lambda mp: last_step("{n: [.nan]}", "ceilings"), "n"),
    "plan bench seconds inf": (lambda mp: last_step("{seconds: .inf}", "bench"), "seconds"),
    "plan bench unknown family": (lambda mp: last_step("{family: yolov5}", "bench"), "yolov5"),
    "plan sweep warmup past its cap": (lambda mp: last_step("{warmup_ms: 1.0e12}"), "warmup_ms"),
    "plan sweep unknown precision": (lambda mp: last_step("{precisions: [fp4]}"), "fp4"),
    "plan model_tables entry without model": (
        lambda mp: last_step("{models: [{widths: [1.0]}]}", "model_tables"),
        "model",
    ),
    "plan numerics seeds -1": (lambda mp: last_step("{seeds: [-1]}", "numerics"), "seeds"),
    "plan probe batch 0": (lambda mp: last_step("{batch: 0}", "probe"), "batch"),
    "collect --max-minutes nan": (lambda mp: plan() + ["--max-minutes", "nan"], "--max-minutes"),
    "collect --max-minutes -5": (lambda mp: plan() + ["--max-minutes=-5"], "--max-minutes"),
    "collect --only an unknown step": (lambda mp: plan() + ["--only", "tinny"], "tinny"),
    "collect --out is a file": (lambda mp: plan()[:-1] + [put("afile", "x")], "afile"),
    "trace --iters 0": (lambda mp: trace("--iters", "0"), "--iters"),
    "trace --iters past its cap": (lambda mp: trace("--iters", "1000000"), "--iters"),
    "trace --batch 0": (lambda mp: trace("--batch", "0"), "--batch"),
    "trace --imgsz 65": (lambda mp: trace("--imgsz", "65"), "--imgsz"),
    "trace --width nan": (lambda mp: trace("--width", "nan"), "--width"),
    "trace --backend tensorrt": (lambda mp: trace("--backend", "tensorrt"), "tensorrt"),
    "trace --out not .json.gz": (lambda mp: trace(out="t.json"), "json.gz"),
    "ncu --widths nan": (
        lambda mp: ["ncu", "--device", "cpu", "--widths", "nan", "--out", "n.csv"],
        "--widths",
    ),
    "ncu --metric-set unknown": (
        lambda mp: ["ncu", "--device", "cpu", "--metric-set", "most", "--out", "n.csv"],
        "most",
    ),
    "ncu --timeout inf": (
        lambda mp: ["ncu", "--device", "cpu", "--timeout", "inf", "--out", "n.csv"],
        "--timeout",
    ),
    "gpm --seconds inf": (
        lambda mp: ["gpm", "--seconds", "inf", "--out", "g.parquet"],
        "--seconds",
    ),
    "gpm --hz 0": (lambda mp: ["gpm", "--hz", "0", "--out", "g.parquet"], "--hz"),
    "profile --gpm-seconds nan": (
        lambda mp: ["profile", "--gpm-seconds", "nan", "--out", "p"],
        "--gpm-seconds",
    ),
    "occupancy --threads 0": (lambda mp: ["occupancy", "--threads", "0"], "threads"),
    "occupancy --threads 2000": (lambda mp: ["occupancy", "--threads", "2000"], "threads"),
    "occupancy --registers 300": (lambda mp: occupancy("--registers", "300"), "registers"),
    "occupancy --cc 4.0": (lambda mp: occupancy("--cc", "4.0"), "4.0"),
    "occupancy --smem -1": (lambda mp: occupancy("--smem=-1"), "--smem"),
    "occupancy --smem 1e400": (lambda mp: occupancy("--smem", "1e400"), "--smem"),
    "occupancy --smem 0.5K": (lambda mp: occupancy("--smem", "0.0001K"), "--smem"),
    "occupancy --smem 300K": (lambda mp: occupancy("--smem", "300K"), "shared_mem"),
    "occupancy --grid 0": (lambda mp: occupancy("--grid", "0"), "--grid"),
    "occupancy --sm-count -1": (lambda mp: occupancy("--sm-count=-1"), "--sm-count"),
    "models --depth nan": (lambda mp: ["models", "--depth", "nan"], "--depth"),
    "models --width inf": (lambda mp: ["models", "--width", "inf"], "--width"),
    "models --imgsz 1e400": (lambda mp: ["models", "--imgsz", "1e400"], "--imgsz"),
    "models --max-channels 0": (lambda mp: ["models", "--max-channels", "0"], "--max-channels"),
    "remeasure --points 0": (
        lambda mp: ["remeasure", "--dataset", "h200/sweep_fp16_nhwc", "--points", "0"],
        "--points",
    ),
    "remeasure --points nan": (
        lambda mp: ["remeasure", "--dataset", "h200/sweep_fp16_nhwc", "--points", "nan"],
        "--points",
    ),
    "remeasure --seed -1": (
        lambda mp: ["remeasure", "--dataset", "h200/sweep_fp16_nhwc", "--seed=-1"],
        "--seed",
    ),
    "remeasure --device tpu": (
        lambda mp: ["remeasure", "--dataset", "h200/sweep_fp16_nhwc", "--device", "tpu"],
        "tpu",
    ),
    "remeasure unknown dataset": (
        lambda mp: ["remeasure", "--dataset", "h200/nope", "--device", "cpu"],
        "h200/nope",
    ),
    "render --timeout 0": (
        lambda mp: ["render", "--notebooks", notebooks(), "--timeout", "0", "--out", "site"],
        "--timeout",
    ),
    "render missing notebooks": (lambda mp: ["render", "--notebooks", "nb", "--out", "s"], "nb"),
    "render --only matches nothing": (
        lambda mp: ["render", "--notebooks", notebooks(), "--only", "99", "--out", "site"],
        "notebooks",
    ),
    "bench --streams 0": (lambda mp: bench("--streams", "0"), "--streams"),
    "bench --models yolov8:nan": (lambda mp: bench("--models", "yolov8:nan"), "width"),
    "bench --device cpux": (lambda mp: bench("--device", "cpux"), "cpux"),
    "bench --seconds past its cap": (lambda mp: bench("--seconds", "86400"), "--seconds"),
    "bench --out 300 characters": (lambda mp: bench(out=f"{LONG}.parquet"), "characters"),
    "env --device cuda:x": (lambda mp: ["env", "--device", "cuda:x"], "cuda:x"),
    "env --device cuda without a GPU": pytest.param(
        lambda mp: ["env", "--device", "cuda"], "cuda", marks=NO_GPU
    ),
    "permission denied while writing": (permission_denied, "permission denied"),
}


def alias_bomb(key: str = "check", levels: int = 9) -> str:
    """A few hundred bytes of nested YAML aliases under ``key`` that stand for 9**levels
    values once expanded."""
    items = ['&a0 ["lolol","lolol","lolol","lolol","lolol","lolol","lolol","lolol","lolol"]']
    items += [f"&a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return f"{key}: [{', '.join(items)}]\n"


def root_with_manifest(text: str) -> str:
    """A dataset root in the working folder whose manifest.json holds ``text``."""
    Path("root").mkdir()
    Path("root/manifest.json").write_text(text)
    return "root"


def sweep_table(**columns) -> str:
    """A sweep table ``old.parquet`` (written by the store) holding one row of ``columns``
    over a valid row's keys."""
    from yolo_sm.contract.store import write_atomic

    row = {
        "family": "yolov8", "scale": "n", "width": 0.0625, "depth": 0.33, "max_channels": 1024,
        "precision": "fp32", "layout": "nchw", "backend": "eager", "batch": 1, "imgsz": 64,
        "compile_mode": "", "device": "cpu", "status": "ok", "median_ms": 1.0,
    }  # fmt: skip
    write_atomic(pd.DataFrame([{**row, **columns}]), Path("old.parquet"))
    return "old.parquet"


def env(name: str, value: str, argv):
    """A case run with environment variable ``name`` set to ``value``."""

    def make(mp):
        mp.setenv(name, value)
        return argv() if callable(argv) else argv

    return make


CHECK = ["check", "--baseline", "h200/sweep_fp16_nhwc", "--candidate", "h200/sweep_fp16_nhwc"]
#: inputs that reached the rendered site, ran away, followed a planted name or passed silently
UNTRUSTED = {
    # unbounded work: aliases expanding past the cap end in one sentence at once
    "config of nested aliases": (
        lambda mp: sweep("--config", put("bomb.yaml", alias_bomb())),
        "aliases",
    ),
    "plan of nested aliases": (
        lambda mp: [
            "collect",
            "--plan",
            put("p.yaml", plan_text() + alias_bomb("x")),
            "--out",
            "r",
        ],
        "aliases",
    ),
    "plan step params of nested aliases": (
        lambda mp: last_step("{" + alias_bomb("widths").strip() + "}"),
        "aliases",
    ),
    "sweep of 4,097 batches": (
        lambda mp: sweep("--batches", ",".join(map(str, range(1, 4098)))),
        "--batches",
    ),
    "sweep grid past 100,000 points": (
        lambda mp: sweep(
            "--widths",
            ",".join(f"{0.0625 + i / 1000:g}" for i in range(100)),
            "--batches",
            ",".join(map(str, range(1, 1002))),
        ),
        "points",
    ),  # fmt: skip
    # plan out names compared as paths
    "plan out ./tiny.parquet beside tiny.parquet": (
        lambda mp: plan("  - name: again\n    kind: sweep\n    out: ./tiny.parquet\n"),
        "tiny.parquet",
    ),
    "plan out tiny.parquet//": (
        lambda mp: plan("  - name: again\n    kind: sweep\n    out: .//tiny.parquet\n"),
        "tiny.parquet",
    ),
    "plan out manifest.json": (
        lambda mp: plan("  - name: m\n    kind: sweep\n    out: manifest.json\n"),
        "manifest.json",
    ),
    "plan out ./manifest.json": (
        lambda mp: plan("  - name: m\n    kind: sweep\n    out: ./manifest.json\n"),
        "manifest.json",
    ),
    "plan out notebook_parameters.yaml": (
        lambda mp: plan("  - name: m\n    kind: sweep\n    out: notebook_parameters.yaml\n"),
        "notebook_parameters.yaml",
    ),
    "plan out .": (lambda mp: plan("  - name: m\n    kind: sweep\n    out: .\n"), "out"),
    # manifests that are JSON of the wrong shape
    "manifest a list": (lambda mp: ["claims", "--data", root_with_manifest("[]")], "manifest"),
    "manifest datasets a list": (
        lambda mp: ["claims", "--data", root_with_manifest('{"datasets": []}')],
        "manifest",
    ),
    "manifest entry a number": (
        lambda mp: ["claims", "--data", root_with_manifest('{"datasets": {"a": 5}}')],
        "manifest",
    ),
    "manifest entry without a file": (
        lambda mp: ["claims", "--data", root_with_manifest('{"datasets": {"a": {}}}')],
        "manifest",
    ),
    "manifest file a number": (
        lambda mp: ["claims", "--data", root_with_manifest('{"datasets": {"a": {"file": 1}}}')],
        "manifest",
    ),
    "manifest provenance a list": (
        lambda mp: [
            "claims",
            "--data",
            root_with_manifest('{"datasets": {"a": {"file": "a.parquet", "provenance": [1]}}}'),
        ],
        "manifest",
    ),
    "manifest kind a number": (
        lambda mp: [
            "claims",
            "--data",
            root_with_manifest('{"datasets": {"a": {"file": "a.parquet", "kind": 3}}}'),
        ],
        "manifest",
    ),
    "manifest machine a string": (
        lambda mp: ["claims", "--data", root_with_manifest('{"datasets": {}, "machine": "x"}')],
        "manifest",
    ),
    "manifest nested 100,000 deep": (
        lambda mp: ["claims", "--data", root_with_manifest("[" * 100_000 + "]" * 100_000)],
        "manifest",
    ),
    # environment variables the package reads
    "YOLO_SM_THREADS=abc": (env("YOLO_SM_THREADS", "abc", lambda: sweep()), "YOLO_SM_THREADS"),
    "YOLO_SM_THREADS=-1": (env("YOLO_SM_THREADS", "-1", lambda: sweep()), "YOLO_SM_THREADS"),
    "YOLO_SM_THREADS=1e9": (env("YOLO_SM_THREADS", "1e9", lambda: sweep()), "YOLO_SM_THREADS"),
    "YOLO_SM_CACHE unwritable": (
        env("YOLO_SM_CACHE", f"{UNWRITABLE}/cache", lambda: sweep()),
        "YOLO_SM_CACHE",
    ),
    "YOLO_SM_CACHE a file": (
        lambda mp: env("YOLO_SM_CACHE", put("cachefile", "x"), lambda: sweep())(mp),
        "YOLO_SM_CACHE",
    ),
    "YOLO_SM_CACHE empty": (env("YOLO_SM_CACHE", "", lambda: sweep()), "YOLO_SM_CACHE"),
    "HOME empty without YOLO_SM_CACHE": (
        lambda mp: (mp.delenv("YOLO_SM_CACHE", raising=False), env("HOME", "", sweep)(mp))[1],
        "HOME",
    ),
    "HOME relative without YOLO_SM_CACHE": (
        lambda mp: (mp.delenv("YOLO_SM_CACHE", raising=False), env("HOME", "h", sweep)(mp))[1],
        "HOME",
    ),
    "YOLO_CONFIG_DIR relative": (
        env("YOLO_CONFIG_DIR", "cfg", lambda: sweep()),
        "YOLO_CONFIG_DIR",
    ),
    "YOLO_SM_DATA missing": (
        env("YOLO_SM_DATA", "no_such_folder", ["claims", "--data", "h200"]),
        "YOLO_SM_DATA",
    ),
    "YOLO_SM_NCU not a program": (
        lambda mp: env("YOLO_SM_NCU", put("ncu", "x"), ["occupancy", "--threads", "256"])(mp),
        "YOLO_SM_NCU",
    ),
    # check
    "check --tolerance inf": (lambda mp: [*CHECK, "--tolerance", "inf"], "--tolerance"),
    "check --tolerance nan": (lambda mp: [*CHECK, "--tolerance", "nan"], "--tolerance"),
    "check --tolerance -0.1": (lambda mp: [*CHECK, "--tolerance=-0.1"], "--tolerance"),
    "check --tolerance 1e9": (lambda mp: [*CHECK, "--tolerance", "1e9"], "--tolerance"),
    "check --json unwritable": (
        lambda mp: [*CHECK, "--json", f"{UNWRITABLE}/v.json"],
        UNWRITABLE,
    ),
    # tables resumed into
    "sweep resumes a table with a NaN key": (
        lambda mp: sweep(out=sweep_table(batch=float("nan"))),
        "old.parquet",
    ),
    "sweep resumes a table with a text batch": (
        lambda mp: sweep(out=sweep_table(batch="one")),
        "old.parquet",
    ),
    "sweep resumes a table with an empty precision": (
        lambda mp: sweep(out=sweep_table(precision=None)),
        "old.parquet",
    ),
    # the exporter
    "monitor --host empty": (lambda mp: ["monitor", "--host", " ", "--duration", "1"], "--host"),
}
CASES = {
    **{f"once broken: {k}": v for k, v in ONCE_BROKEN.items()},
    **FURTHER,
    **{f"untrusted: {k}": v for k, v in UNTRUSTED.items()},
}


def _argv_and_needle(case):
    return case.values if hasattr(case, "values") else case


def _params():
    out = []
    for name, case in CASES.items():
        marks = getattr(case, "marks", ())
        make, needle = _argv_and_needle(case)
        out.append(pytest.param(make, needle, id=name, marks=marks))
    return out


def _tree(path: Path):
    return sorted(
        (str(p.relative_to(path)), p.is_dir(), p.stat().st_size if p.is_file() else 0)
        for p in path.rglob("*")
    )


def test_the_table_holds_the_known_cases_and_more():
    assert len(ONCE_BROKEN) >= 42 and len(FURTHER) >= 40 and len(UNTRUSTED) >= 35
    assert len(CASES) >= 150


@pytest.mark.timeout(120)
@pytest.mark.parametrize("make, needle", _params())
def test_bad_input_is_one_line_exit_2_nothing_written(tmp_path, monkeypatch, capsys, make, needle):
    monkeypatch.chdir(tmp_path)
    argv = make(monkeypatch)
    before = _tree(tmp_path)
    rc = main(argv)
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert rc == 2, err
    assert len(lines) == 1, err
    assert lines[0].startswith("yolo-sm: error: ") and "Traceback" not in err
    assert needle.lower() in lines[0].lower(), lines[0]
    assert out == ""
    assert _tree(tmp_path) == before  # no output, probe, lock or temporary file


def test_an_interrupt_exits_130_and_keeps_what_was_written(tmp_path, monkeypatch, capsys):
    from yolo_sm.core import sweep as sweep_module

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sweep_module, "run_sweep", run_sweep_then(KeyboardInterrupt))
    assert main(sweep()) == 130
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "interrupted" in err[0]
    df = pd.read_parquet(tmp_path / "s.parquet")  # the table written before the interrupt
    assert df.median_ms.tolist() == [1.0]
    assert [p.name for p in tmp_path.iterdir()] == ["s.parquet"]  # no temporary file beside it


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "argv, needle",
    [
        (["sweep", "--config", "c.yaml", "--out", "s.parquet"], "c.yaml"),
        (["collect", "--plan", "c.yaml", "--out", "root"], "c.yaml"),
        (["occupancy", "--threads", "256", "--smem", "nan"], "--smem"),
        (["env", "--device", "tpu"], "tpu"),
    ],
    ids=["binary config", "binary plan", "occupancy --smem nan", "env --device tpu"],
)
def test_bad_input_in_a_real_process(tmp_path, argv, needle):
    (tmp_path / "c.yaml").write_bytes(bytes(range(256)) * 8)
    before = _tree(tmp_path)
    res = subprocess.run(
        [sys.executable, "-m", "yolo_sm", *argv],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert res.returncode == 2
    assert len(res.stderr.splitlines()) == 1 and needle in res.stderr, res.stderr
    assert res.stdout == "" and _tree(tmp_path) == before


@pytest.mark.parametrize(
    "kw",
    [
        {"warmup_ms": float("inf")},
        {"warmup_ms": 1e12},
        {"budget_ms": float("inf")},
        {"budget_ms": 1e9},
    ],
)
def test_timing_refuses_an_endless_warm_up_or_budget(kw):
    from yolo_sm.core.timing import measure

    calls = []
    with pytest.raises(UserError):
        measure(lambda: calls.append(1), with_provenance=False, **kw)
    assert calls == []  # refused before the first call


def test_outputs_that_can_be_written_pass(tmp_path):
    """The output check refuses nothing writable: an existing table (a resume), an existing or
    new folder, a file in folders still to be made; and it creates none of them."""
    (tmp_path / "old.parquet").write_bytes(b"x")
    (tmp_path / "root").mkdir()
    before = _tree(tmp_path)
    assert values.output_path(tmp_path / "old.parquet") == tmp_path / "old.parquet"
    assert values.output_path(tmp_path / "root", folder=True) == tmp_path / "root"
    assert values.output_path(tmp_path / "new" / "deeper", folder=True)
    assert values.output_path(tmp_path / "new" / "deeper" / "t.parquet")
    assert _tree(tmp_path) == before
    with pytest.raises(UserError):
        values.output_path(tmp_path / "old.parquet" / "t.parquet")  # under a file
