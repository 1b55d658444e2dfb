"""The side-by-side benchmark on CPU (tiny model): every variant, ratios against the baseline."""

import pandas as pd

from yolo_sm.cli import main


def test_bench_table_on_cpu(tmp_path, capsys):
    out = tmp_path / "b.parquet"
    argv = [
        "bench",
        "--device",
        "cpu",
        "--models",
        "yolov8:0.0625",
        "--batches",
        "1",
        "--engines",
        "eager/fp32/nchw",
        "--seconds",
        "0.3",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    df = pd.read_parquet(out)
    assert list(df.variant) == [
        "eager/fp16/nhwc",
        "eager/fp32/nchw",
        "pipeline/eager/fp32",
        "ultralytics_predict",
    ]
    assert (df.status == "ok").all() and (df.img_per_s > 0).all()
    assert df.loc[df.variant == "eager/fp16/nhwc", "vs_baseline"].item() == 1.0
    ratio = df.img_per_s / df.img_per_s.iloc[0]
    assert (abs(df.vs_baseline - ratio) < 1e-9).all()
    assert df.prov_torch.notna().all()


def test_bench_bad_input(tmp_path, capsys):
    for argv in (["--models", "yolov8:wide"], ["--batches", "0"], ["--engines", "eager/fp16"]):
        assert main(["bench", "--device", "cpu", *argv, "--out", str(tmp_path / "x.parquet")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("yolo-sm: error:")
    assert not (tmp_path / "x.parquet").exists()
