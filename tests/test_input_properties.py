"""Hypothesis properties over every parser and loader of user input: config labels, config and
plan files (any bytes, any YAML, plans of any shape), the parameters of every kind of plan step
and the specs built from them, batch lists, finite numbers, byte counts, device names,
occupancy inputs (the calculator and the command) and output paths. Whatever they are given,
the only exception that escapes is the project's UserError; what they return is in range.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from yolo_sm.analyse import occupancy as occ
from yolo_sm.cli.common import byte_count
from yolo_sm.cli.main import main
from yolo_sm.contract import values
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.labels import config_label, parse_config
from yolo_sm.contract.plans import KINDS, check_params, load_plan, load_yaml
from yolo_sm.contract.values import MAX_BATCH
from yolo_sm.topics import STEPS

#: small and without a database: the whole file runs in seconds and writes nothing
HYPO = settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.dates()
)
ANY = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
NUMBERISH = st.sampled_from(["nan", "inf", "-inf", "1e400", "-1", "0", "1.5", "8", "1_0", ""]) | (
    st.text(alphabet="0123456789.,eE+-_ kKbBinaf", max_size=12)
)


LABELISH = st.builds(
    "{}_w{}_{}_{}_b{}".format,
    st.sampled_from(["yolov8", "wide", "resnet101"]),
    st.text("0123456789.", min_size=1, max_size=5),
    st.sampled_from(["fp16", "bf16", "fp8"]),
    st.sampled_from(["nchw", "nhwc"]),
    st.integers(min_value=0, max_value=10**12).map(str),
)


@settings(HYPO, max_examples=100)
@given(label=LABELISH | LABELISH | st.text(max_size=40) | SCALARS)
def test_labels_parse_or_raise_user_error(label):
    try:
        parsed = parse_config(label)
    except UserError:
        assert parse_config(label, strict=False)["family"] is None
        return
    assert parsed["batch"] >= 0 and parsed["width"] >= 0 and parsed["layout"] in ("nchw", "nhwc")


@HYPO
@given(
    family=st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True),
    width=st.floats(min_value=1e-3, max_value=1e3),
    precision=st.from_regex(r"[a-z0-9]{1,6}", fullmatch=True),
    layout=st.sampled_from(["nchw", "nhwc"]),
    batch=st.integers(min_value=0, max_value=10**9 - 1),
)
def test_labels_round_trip(family, width, precision, layout, batch):
    label = config_label(family, width, precision, layout, batch)
    if "e" in f"{width:g}":  # an exponent is not a label's width
        with pytest.raises(UserError):
            parse_config(label)
        return
    parsed = parse_config(label)
    assert (parsed["family"], parsed["precision"], parsed["layout"]) == (family, precision, layout)
    assert parsed["width"] == float(f"{width:g}") and parsed["batch"] == batch


def _load_bytes(raw: bytes):
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "plan.yaml"
        p.write_bytes(raw)
        for loader in (load_yaml, load_plan):
            with contextlib.suppress(UserError):
                loader(str(p))
        assert sorted(os.listdir(d)) == ["plan.yaml"]


@HYPO
@given(raw=st.binary(max_size=300))
def test_config_and_plan_files_of_any_bytes(raw):
    _load_bytes(raw)


@HYPO
@given(doc=ANY)
def test_config_and_plan_files_of_any_yaml(doc):
    _load_bytes(yaml.safe_dump(doc, allow_unicode=True).encode())


def _param_values(kind):
    keys = st.sampled_from(sorted(STEPS[kind][0].params())) | st.text(max_size=6)
    return st.dictionaries(keys, ANY, max_size=4)


@st.composite
def plans(draw):
    steps = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(KINDS) | SCALARS)
        step = {
            "name": draw(st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True) | SCALARS),
            "kind": kind,
            "out": draw(st.from_regex(r"[a-z]{1,8}\.parquet", fullmatch=True) | SCALARS),
        }
        if kind in STEPS:
            step["params"] = draw(_param_values(kind))
        if draw(st.booleans()):
            step["est_s"] = draw(SCALARS)
        steps.append(step)
    return {
        "name": draw(st.text(max_size=8) | SCALARS),
        "device": draw(st.sampled_from(["cpu", "cuda", "cuda:1", "tpu"]) | SCALARS),
        "steps": steps,
    }


@HYPO
@given(doc=plans())
def test_plans_of_any_shape_load_or_raise_user_error(doc):
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "plan.yaml"
        p.write_text(yaml.safe_dump(doc, allow_unicode=True))
        try:
            got = load_plan(p)
        except UserError:
            return
    assert all(s.kind in KINDS for s in got.steps)
    assert len({s.name for s in got.steps}) == len(got.steps)
    assert len({s.out for s in got.steps}) == len(got.steps)


@HYPO
@given(kind=st.sampled_from(["sweep", "bench"]), data=st.data())
def test_specs_take_whatever_the_plan_check_passes(kind, data):
    """Parameters that pass the plan's check build their spec, or fail in one UserError."""
    from yolo_sm.core.bench import BenchSpec
    from yolo_sm.core.sweep import SweepSpec

    params = data.draw(_param_values(kind))
    try:
        check_params(kind, params, "step")
    except UserError:
        return
    with contextlib.suppress(UserError):
        (SweepSpec if kind == "sweep" else BenchSpec).from_mapping({"device": "cpu", **params})


@HYPO
@given(kind=st.sampled_from(KINDS), data=st.data())
def test_plan_params_of_every_kind(kind, data):
    with contextlib.suppress(UserError):
        check_params(kind, data.draw(_param_values(kind)), "step")


@HYPO
@given(v=ANY | NUMBERISH)
def test_batch_lists(v):
    try:
        got = values.wholes(v, "batches", lo=1, hi=MAX_BATCH)
    except UserError:
        return
    assert got and all(isinstance(b, int) and 1 <= b <= MAX_BATCH for b in got)
    with contextlib.suppress(UserError):
        assert values.batches(",".join(map(str, got)), "--batches") == got


@HYPO
@given(v=ANY | NUMBERISH)
def test_finite_numbers(v):
    try:
        x = values.number(v, "x", lo=-1e9, hi=1e9)
    except UserError:
        return
    assert -1e9 <= x <= 1e9


@HYPO
@given(text=NUMBERISH | st.text(max_size=10))
def test_byte_counts(text):
    try:
        n = byte_count(text)
    except UserError:
        return
    assert isinstance(n, int) and n >= 0


INTISH = (
    st.integers(min_value=-5, max_value=300_000)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.booleans()
    | st.none()
    | st.text(max_size=4)
)


@HYPO
@given(
    cc=st.sampled_from(sorted(occ.ARCH)) | st.text(max_size=5) | SCALARS,
    threads=INTISH,
    regs=INTISH,
    smem=INTISH,
)
def test_occupancy_inputs(cc, threads, regs, smem):
    try:
        r = occ.theoretical_occupancy(cc, threads, regs, smem)
    except UserError:
        return
    assert 0 <= r.occupancy_pct <= 100 and r.active_blocks_per_sm >= 0


@HYPO
@given(
    threads=NUMBERISH,
    smem=NUMBERISH,
    grid=NUMBERISH,
    sms=NUMBERISH,
)
def test_occupancy_command_is_a_table_or_one_sentence(threads, smem, grid, sms):
    argv = ["occupancy", f"--threads={threads}", f"--smem={smem}", f"--grid={grid}"]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([*argv, f"--sm-count={sms}"])
    assert (rc, len(err.getvalue().splitlines())) in ((0, 0), (2, 1)), err.getvalue()


PART = st.text(st.characters(blacklist_characters="/"), min_size=1, max_size=210).map(
    lambda p: "x" if p in (".", "..") else p
)


@HYPO
@given(parts=st.lists(PART, min_size=1, max_size=3), folder=st.booleans())
def test_output_paths_are_checked_without_creating_anything(parts, folder):
    with tempfile.TemporaryDirectory() as d:
        with contextlib.suppress(UserError):
            values.output_path(Path(d, *parts), folder=folder)
        assert os.listdir(d) == []


@HYPO
@given(name=st.text(max_size=12) | st.sampled_from(["cpu", "cuda", "cuda:0", "cuda:12"]) | SCALARS)
def test_device_names(name):
    try:
        got = values.device_name(name)
    except UserError:
        return
    assert values.DEVICE.fullmatch(got)


# --- files from a dataset root or a profiler: manifests, Kineto traces, Nsight Compute tables ---

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=16,
)
ENTRY = st.fixed_dictionaries(
    {"file": st.text(max_size=8) | JSONISH},
    optional={k: JSONISH | st.text(max_size=8) for k in ("kind", "provenance", "role", "rows")},
)


@HYPO
@given(
    doc=JSONISH
    | st.fixed_dictionaries(
        {"datasets": st.dictionaries(st.text(max_size=6), ENTRY | JSONISH, max_size=3)},
        optional={"machine": JSONISH},
    )
)  # noqa: E501
def test_manifests_of_any_json_read_or_raise_user_error(doc):
    from yolo_sm.contract.datasets import open_root

    with tempfile.TemporaryDirectory() as d:
        Path(d, "manifest.json").write_text(json.dumps(doc))
        root = open_root(d)
        try:
            names = root.names()
            root.machine(), root.device_name(), root.find_all("sweep")
        except UserError:
            return
        assert all(isinstance(root.info(n).get("file"), str) for n in names)


EVENT = st.fixed_dictionaries(
    {},
    optional={
        "ph": st.sampled_from(["X", "B", "i"]) | JSONISH,
        "cat": st.sampled_from(["kernel", "cuda_runtime", "user_annotation", "cpu_op"]) | JSONISH,
        "name": st.sampled_from(["profiled_forward", "model.0 Conv [backbone]", "k"]) | JSONISH,
        "ts": st.floats(allow_nan=True) | st.integers() | JSONISH,
        "dur": st.floats(allow_nan=True) | JSONISH,
        "pid": st.integers(0, 2) | JSONISH,
        "tid": st.integers(0, 2) | JSONISH,
        "args": st.fixed_dictionaries(
            {},
            optional={
                "correlation": st.integers(0, 3) | JSONISH,
                "grid": st.lists(st.integers(-2, 8), max_size=3) | JSONISH,
                "block": st.lists(st.integers(-2, 8), max_size=3) | JSONISH,
                "registers per thread": st.integers(-1, 300) | JSONISH,
                "device": st.integers(0, 2) | JSONISH,
            },
        )
        | JSONISH,
    },
)


@HYPO
@given(
    doc=JSONISH
    | st.fixed_dictionaries(
        {"traceEvents": st.lists(EVENT | JSONISH, max_size=8) | JSONISH},
        optional={"deviceProperties": JSONISH},
    ),
    gz=st.booleans(),
)
def test_kineto_traces_of_any_json_load_or_raise_user_error(doc, gz):
    import gzip

    from yolo_sm.core.profiling.kineto import load_kernels

    with tempfile.TemporaryDirectory() as d:
        path = Path(d, "t.json.gz" if gz else "t.json")
        raw = json.dumps(doc, allow_nan=True).encode()
        path.write_bytes(gzip.compress(raw) if gz else raw)
        with contextlib.suppress(UserError):
            assert len(load_kernels(path)) >= 0


@HYPO
@given(raw=st.binary(max_size=200), gz=st.booleans())
def test_kineto_traces_of_any_bytes_raise_user_error(raw, gz):
    from yolo_sm.core.profiling.kineto import read_trace

    with tempfile.TemporaryDirectory() as d:
        path = Path(d, "t.json.gz" if gz else "t.json")
        path.write_bytes(raw)
        with contextlib.suppress(UserError):
            assert isinstance(read_trace(path)["traceEvents"], list)


NCU_HEADER = '"ID","Kernel Name","NVTX","Metric Name","Metric Unit","Metric Value"'


@HYPO
@given(
    rows=st.lists(
        st.lists(st.text(alphabet='0123456789.,"abc -nan', max_size=8), min_size=0, max_size=7),
        max_size=5,
    ),
    header=st.sampled_from([NCU_HEADER, '"ID","Kernel Name","Duration"', '"x"']),
)
def test_ncu_tables_of_any_text_load_or_raise_user_error(rows, header):
    from yolo_sm.core.profiling.ncu import load_ncu

    text = header + "\n" + "\n".join(",".join(f'"{c}"' for c in r) for r in rows) + "\n"
    with tempfile.TemporaryDirectory() as d:
        path = Path(d, "n.csv")
        path.write_text(text)
        with contextlib.suppress(UserError):
            assert len(load_ncu(path)) >= 0


@HYPO
@given(levels=st.integers(1, 12), width=st.integers(1, 12), key=st.sampled_from(["check", "x"]))
def test_yaml_of_nested_aliases_loads_or_raises_user_error(levels, width, key):
    items = [f"&a0 [{','.join(['1'] * width)}]"]
    items += [f"&a{i} [{','.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    _load_bytes(f"{key}: [{', '.join(items)}]\n".encode())
