"""Ceilings that hold: no measured forward, layer or kernel group of any shipped table delivers
more than 100 % of its precision's burst matmul ceiling on the same machine (CPU, shipped data).

A ceiling that measured work exceeds makes every share of peak meaningless. A ceilings table
from before burst and sustained were told apart holds only a back-to-back, power-limited figure
(no ``regime`` column): on such a table this test is expected to fail (strict xfail, so that the
marker cannot outlive the table), and passes once the ceilings step is collected again."""

from pathlib import Path

import pandas as pd
import pytest

from yolo_sm.analyse.kernels import add_kernel_class
from yolo_sm.contract.datasets import open_root
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.hardware import CEILINGS, ceiling
from yolo_sm.contract.labels import parse_config
from yolo_sm.topics.roofline import analyse as roofline

DATA = Path(__file__).resolve().parents[1] / "data"
ROOTS = sorted(p.name for p in DATA.iterdir() if (p / "manifest.json").exists())


def delivered(root) -> pd.DataFrame:
    """Every measured TFLOP/s of ``root``: ``dataset``, ``what``, ``precision``, ``tflops``."""
    rows = []
    for name in root.names():
        kind = root.info(name).get("kind")
        df = root.load(name)
        if kind in ("sweep", "bench") and "tflops" in df:
            ok = df[(df.status == "ok") & df.tflops.notna()]
            what = ok.get("variant", ok.backend).astype(str) + " b" + ok.batch.astype(str)
            rows.append(
                pd.DataFrame(
                    {"dataset": name, "what": what, "precision": ok.precision, "tflops": ok.tflops}
                )
            )
        elif kind == "int8_kernels":  # each convolution alone, per kernel
            ok = df[(df.scope == "conv") & (df.status == "ok") & df.tops.notna()]
            what = "w" + ok.width.map("{:g}".format) + " " + ok.layer + " " + ok.kernel
            prec = ok.kernel.where(ok.kernel == "fp16", "int8")
            rows.append(
                pd.DataFrame({"dataset": name, "what": what, "precision": prec, "tflops": ok.tops})
            )
        elif kind == "ncu" and root.has("model_layers"):
            try:
                t = roofline.roofline_table(df, root.load("model_layers"), 1.0, 1.0)
            except (UserError, KeyError, ValueError):
                continue  # not a YOLO table (resnet, the wide stack: below)
            t = t[t.flops > 0]
            rows.append(
                pd.DataFrame(
                    {
                        "dataset": name,
                        "what": t.config + " " + t.layer,
                        "precision": t.precision,
                        "tflops": t.achieved_tflops,
                    }
                )
            )
    if root.has("ncu_wide_stack") and root.has("model_layers"):
        rows.append(wide_layers(root.load("ncu_wide_stack"), root.load("model_layers")))
    return pd.concat(rows, ignore_index=True)


def wide_layers(ncu, layers) -> pd.DataFrame:
    """Each layer of the wide convolution stack: its FLOPs over its tensor-core convolution
    kernels' time (the fastest convolutions any table holds)."""
    k = add_kernel_class(ncu)
    k = k[k.kernel_class == "tensor_core_conv"]
    t = k.groupby(["config", "layer"]).duration_us.sum().reset_index()
    t = t.assign(
        **{c: [parse_config(x)[c] for x in t.config] for c in ("width", "batch", "precision")}
    )
    w = layers[layers.model == "wide"][["width", "layer", "flops"]]
    m = t.merge(w, on=["width", "layer"])
    return pd.DataFrame(
        {
            "dataset": "ncu_wide_stack",
            "what": m.config + " " + m.layer,
            "precision": m.precision,
            "tflops": m.flops * m.batch / (m.duration_us * 1e-6) / 1e12,
        }
    )


def _old_table(name: str) -> bool:
    root = open_root(DATA / name)
    return root.has(CEILINGS) and "regime" not in root.load(CEILINGS)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(
            n,
            marks=pytest.mark.xfail(
                _old_table(n),
                reason=f"data/{n}/ceilings.parquet holds back-to-back (power-limited) figures "
                "only; collect its ceilings step again",
                strict=True,
            ),
        )
        for n in ROOTS
    ],
)
def test_no_measured_work_exceeds_its_burst_ceiling(name):
    root = open_root(DATA / name)
    if not root.has(CEILINGS):
        pytest.skip(f"{name} holds no measured ceilings")
    d = delivered(root)
    assert len(d) > 0
    peaks = {}
    for prec in d.precision.unique():
        hit = ceiling(root, f"matmul_{prec}")
        if hit is not None:
            peaks[prec] = hit[0]
    d = d[d.precision.isin(peaks)]
    d = d.assign(pct=100 * d.tflops / d.precision.map(peaks))
    over = d[d.pct > 100].sort_values("pct", ascending=False)
    assert over.empty, over.head(10).to_string()
    assert (d.pct > 0).any()  # the test compared something


def test_the_int8_kernels_rates_count_against_their_precisions_ceiling(tmp_path, make_root):
    """Each convolution of an int8_kernels table counts once per kernel: its int8 kernels
    against matmul_int8, its fp16 row against matmul_fp16."""
    from yolo_sm.contract import manifest

    folder = make_root("k", ["ceilings"])
    table = pd.read_parquet(Path(__file__).parent / "fixtures" / "int8_kernels_h200.parquet")
    table.to_parquet(folder / "int8_kernels.parquet")
    cmd = "yolo-sm collect --plan data/plans/full.yaml --out k --only int8_kernels"
    manifest.register(folder, "int8_kernels", "int8_kernels.parquet", "int8_kernels", "t", cmd)
    d = delivered(open_root(folder))
    ok = table[(table.scope == "conv") & (table.status == "ok")]
    assert set(d.dataset) == {"int8_kernels"} and len(d) == len(ok)
    assert (d.precision == "fp16").sum() == (ok.kernel == "fp16").sum()
    assert d[d.precision == "int8"].tflops.max() == ok[ok.kernel != "fp16"].tops.max()
