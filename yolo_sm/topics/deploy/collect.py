"""Cold then warm torch.compile builds per (width, compile mode): two fresh processes, one new
inductor cache (``python -m yolo_sm.topics.deploy.collect ARGS_JSON RESULT_JSON``: the child)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from yolo_sm.contract.scrub import user_command
from yolo_sm.core.engines import EngineConfig, build_engine
from yolo_sm.core.grid import Pace, free_memory, held, longest_by_width, run_grid, width_scaled
from yolo_sm.core.models import build_yolo
from yolo_sm.core.provenance import stamp
from yolo_sm.core.stopwatch import phase
from yolo_sm.core.sweep import failure
from yolo_sm.core.timing import measure_engine
from yolo_sm.topics.deploy import CacheStep

#: what a build row keeps of the engine's info
INFO_COLUMNS = (
    "compile_s", "compile_cache", "fx_cache_hits", "fx_cache_misses", "cache_files_before",
    "cache_files_after", "autotuned_ops", "autotune_reads", "graphs_compiled",
)  # fmt: skip
#: the columns that name a row of a compile_cache table
KEY = ("width", "compile_mode", "cache")
#: the build of each planned state, in order: the first fills the empty folder
RUNS = ("cold", "warm")


def child_env(cache_dir: str, environ=None) -> dict:
    """This environment, inductor's and Triton's caches in ``cache_dir``, the package importable."""
    env = dict(os.environ if environ is None else environ)
    env["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
    env["TRITON_CACHE_DIR"] = str(Path(cache_dir) / "triton")
    pkg_root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH")) if p)
    return env


def run_child(args: dict, env: dict, timeout_s: float) -> dict:
    """One build in a fresh process: its result row, or an error row with its last output line."""
    with tempfile.TemporaryDirectory(prefix="yolo_sm-build-") as tmp:
        result = Path(tmp) / "row.json"
        cmd = [sys.executable, "-m", "yolo_sm.topics.deploy.collect", json.dumps(args), str(result)]
        try:
            done = subprocess.run(cmd, env=env, timeout=timeout_s, capture_output=True, text=True)
        except subprocess.TimeoutExpired:
            return {"status": "error", "message": f"the build process ran past {timeout_s:g} s"}
        if result.exists():
            return json.loads(result.read_text())
        tail = (done.stderr or done.stdout or "").strip().splitlines()
        why = tail[-1][:500] if tail else f"exit status {done.returncode}"
        return {"status": "error", "message": f"the build process failed: {why}"}


def _complete(spec: CacheStep):
    """Whether a unit's rows hold both builds with ``spec``'s model, shape and precision."""

    def complete(unit, rows) -> bool:
        head = _head(spec, *unit)
        same = [r for r in rows if all(r.get(k) == v for k, v in head.items())]
        return set(RUNS) <= {r.get("cache") for r in same}

    return complete


def missing_units(spec: CacheStep, out: str | os.PathLike) -> list[tuple[float, str]]:
    """The (width, mode) units of ``spec`` the table ``out`` lacks."""
    return _held(spec, out)[1]


def _held(spec: CacheStep, out) -> tuple[list[dict], list[tuple[float, str]]]:
    return held(spec.units(), out, KEY, "compile_cache", _key, _row_key, _complete(spec))


def missing_seconds(spec: CacheStep, out: str | os.PathLike) -> float | None:
    """Seconds the units ``out`` lacks will take (None: nothing to go by)."""
    rows, todo = _held(spec, out)
    estimates = [unit_estimate(spec, u, Pace(rows=rows)) for u in todo]
    return None if None in estimates else sum(estimates)


def with_unit_seconds(rows: list[dict]) -> list[dict]:
    """``rows`` with ``unit_s`` where missing: its unit's ``process_s`` summed."""
    summed: dict[tuple[float, str], float] = {}
    for r in rows:
        took = r.get("process_s")
        if took is not None and math.isfinite(took):
            summed[_row_key(r)] = summed.get(_row_key(r), 0.0) + float(took)
    out = []
    for r in rows:
        took = r.get("unit_s")
        if (took is None or not math.isfinite(took)) and _row_key(r) in summed:
            r = {**r, "unit_s": summed[_row_key(r)]}
        out.append(r)
    return out


def _same_shape(spec: CacheStep, mode: str | None = None):
    """Rows built with ``spec``'s batch, size and precision (and ``mode``)."""
    head = {k: v for k, v in _head(spec, 0.0, "").items() if k not in ("width", "compile_mode")}

    def keep(r: dict) -> bool:
        same = all(r.get(k, v) == v for k, v in head.items())
        return same and (mode is None or r.get("compile_mode") == mode)

    return keep


def unit_estimate(spec: CacheStep, unit: tuple[float, str], pace: Pace) -> float | None:
    """Seconds a (width, mode) unit will take: the longest unit of the mode held, scaled to the
    width; else the plan's ``mode_est_s``, else the longest of any mode; None without any."""
    width, mode = unit
    rows = with_unit_seconds(pace.rows)
    est = width_scaled(longest_by_width(rows, _same_shape(spec, mode)), width)
    if est is None and mode in dict(spec.mode_est_s):
        return dict(spec.mode_est_s)[mode]
    if est is None:
        est = width_scaled(longest_by_width(rows, _same_shape(spec)), width)
    return est


def _key(unit: tuple[float, str]) -> tuple[float, str]:
    return float(unit[0]), str(unit[1])


def _row_key(row: dict) -> tuple[float, str]:
    return float(row["width"]), str(row["compile_mode"])


def run_cache_builds(
    spec: CacheStep,
    out: str | os.PathLike,
    runner=None,
    progress=True,
    deadline: float | None = None,
    est_unit_s: float | None = None,
    clock=None,
):
    """Build each unit of ``spec`` that ``out`` lacks, cold then warm, by ``runner``
    (:func:`run_child`); no unit starts that would end past ``deadline``."""
    runner = runner or run_child
    command = user_command(sys.argv) if sys.argv and sys.argv[0] else None

    def measure(unit, _state) -> list[dict]:
        width, mode = unit
        rows = []
        with tempfile.TemporaryDirectory(prefix="yolo_sm-inductor-") as cache_dir:
            for run, planned in enumerate(RUNS, 1):
                if progress:
                    print(
                        f"compile cache: width {width:g}, {mode}, {planned} build",
                        file=sys.stderr,
                        flush=True,
                    )
                args = {**_build_args(spec), "width": width, "compile_mode": mode}
                t0 = time.perf_counter()
                row = runner(args, child_env(cache_dir), spec.timeout_s)
                process_s = time.perf_counter() - t0
                if "prov_command" in row:  # the command that asked for the build, not the child's
                    row["prov_command"] = command
                rows.append(
                    {**_head(spec, width, mode), "run": run, "cache": planned, **row,
                     "process_s": process_s}
                )  # fmt: skip
        return rows

    def estimate(unit, pace: Pace) -> float:
        est = unit_estimate(spec, unit, pace)
        return est if est is not None else est_unit_s or len(RUNS) * spec.timeout_s

    return run_grid(
        spec.units(),
        measure,
        key=_key,
        row_key=_row_key,
        group=_key,  # each unit its own group: the deadline is checked before each
        complete=_complete(spec),
        out=Path(out),
        columns=KEY,
        kind="compile_cache",
        metadata={"spec": asdict(spec), "argv": sys.argv},
        deadline=deadline,
        estimate=estimate,
        clock=clock,
        seconds_column="unit_s",
        describe=lambda unit: f"width {unit[0]:g}, mode {unit[1]}",
        progress=progress,
        device=spec.device,
    )


def _build_args(spec: CacheStep) -> dict:
    """What every build process of ``spec`` is given (a unit adds its width and mode)."""
    args = asdict(spec)
    for k in ("widths", "modes", "width_modes"):
        args.pop(k)
    return args


def _head(spec: CacheStep, width: float, mode: str) -> dict:
    return {
        "family": spec.family,
        "width": float(width),
        "batch": int(spec.batch),
        "imgsz": int(spec.imgsz),
        "precision": spec.precision,
        "layout": spec.layout,
        "device": spec.device,
        "compile_mode": mode,
    }


def build_and_time(args: dict) -> dict:
    """In the build process: the compiled engine, its build seconds, cache columns and timing."""
    engine = None
    try:
        model = build_yolo(args["family"], float(args["width"]))
        config = EngineConfig(
            backend="compile",
            precision=args["precision"],
            layout=args["layout"],
            batch=int(args["batch"]),
            imgsz=int(args["imgsz"]),
            device=args["device"],
            compile_mode=args["compile_mode"],
        )
        with phase("build") as build:
            engine = build_engine(model, config)
        m = measure_engine(engine, warmup_ms=args["warmup_ms"], budget_ms=args["budget_ms"])
        info = engine.info
        row = {
            "status": "ok",
            "message": "",
            "build_s": build.seconds,
            **{k: info.get(k) for k in INFO_COLUMNS},
            "rel_err": engine.rel_err,
            "median_ms": m.median_ms,
            "iqr_ms": m.iqr_ms,
            "img_per_s": m.img_per_s,
            "n_samples": m.n,
            "warmup_s": m.warmup_s,
            "timed_s": m.timed_s,
        }
        row.update(stamp(m.provenance))
    except Exception as e:  # noqa: BLE001 - every failure is a row
        row = failure(e)
    finally:
        if engine is not None:
            engine.close()
        free_memory(collect=False)
    return row


def plain_value(v):
    """A numpy or torch scalar as its Python number; anything else as text."""
    return v.item() if hasattr(v, "item") else str(v)


def main(argv: list[str]) -> int:
    args, result = json.loads(argv[0]), Path(argv[1])
    row = build_and_time(args)
    result.write_text(json.dumps(row, default=plain_value))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
