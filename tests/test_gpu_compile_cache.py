"""Cold and warm torch.compile builds on a GPU (marker ``gpu``; run on the H200 with
``pytest -m gpu``): two fresh processes against one new inductor cache folder, the second
reading what the first wrote."""

import pytest

pytestmark = pytest.mark.gpu


def test_second_build_process_reads_the_disk_cache(tmp_path):
    from yolo_sm.collect import cache_builds
    from yolo_sm.contract.schema import validate

    spec = cache_builds.CacheSpec(widths=(0.25,), batch=1, device="cuda", budget_ms=50)
    df = cache_builds.run_cache_builds(spec, tmp_path / "c.parquet", progress=False)
    validate(df, "compile_cache")
    assert (df.status == "ok").all(), df.message.tolist()
    cold, warm = df.iloc[0], df.iloc[1]
    assert cold.cache == "cold" and warm.cache == "warm"
    assert cold.compile_cache == "cold" and cold.cache_files_after > 0
    assert warm.compile_cache == "warm" or warm.compile_s < cold.compile_s
    assert warm.img_per_s > 0 and cold.img_per_s > 0
    print(
        f"compile_s cold {cold.compile_s:.1f} s ({cold.compile_cache}), warm "
        f"{warm.compile_s:.1f} s ({warm.compile_cache}); process {cold.process_s:.0f} / "
        f"{warm.process_s:.0f} s"
    )
