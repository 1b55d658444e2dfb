"""Cold and warm torch.compile builds on a GPU (marker ``gpu``; run on a CUDA machine with
``pytest -m gpu``): two fresh processes against one new inductor cache folder, the second
reading what the first wrote."""

import pytest

pytestmark = pytest.mark.gpu


def test_second_build_process_reads_the_disk_cache(tmp_path):
    from yolo_sm.contract.schema import validate
    from yolo_sm.topics.deploy import collect as cache_builds

    spec = cache_builds.CacheStep(widths=(0.25,), batch=1, device="cuda", budget_ms=50)
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


_BUILD = """
import json, torch
from yolo_sm.core.engines.config import EngineConfig
from yolo_sm.core.engines.torch_backends import build_compiled
torch.manual_seed(0)
m = torch.nn.Sequential(
    torch.nn.Conv2d(3, 64, 3, padding=1), torch.nn.SiLU(), torch.nn.Conv2d(64, 128, 3, padding=1),
    torch.nn.SiLU(), torch.nn.Conv2d(128, 64, 1),
).eval().cuda()
c = EngineConfig(backend="compile", batch=8, imgsz=64, compile_mode="max-autotune-no-cudagraphs")
print(json.dumps(build_compiled(m, c).info, default=str))
"""


def _build_in_a_process(code: str, env: dict) -> dict:
    """Run ``code`` (one of the builds above) in a fresh Python: the engine's ``info``."""
    import json
    import subprocess
    import sys

    p = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=500
    )
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_a_max_autotune_build_that_finds_its_autotuning_on_disk_is_not_cold(tmp_path):
    """Three processes on one cache folder: the first compiles and autotunes (cold), the second
    reads its graphs (warm, nothing autotuned), the third finds the graphs gone but the
    autotuning results kept (partial, nothing autotuned, its autotunings read from disk)."""
    import shutil

    from yolo_sm.topics.deploy import collect as cache_builds

    folder = tmp_path / "inductor"
    folder.mkdir()
    env = cache_builds.child_env(str(folder))

    def build():
        return _build_in_a_process(_BUILD, env)

    cold = build()
    assert cold["compile_cache"] == "cold" and cold["autotuned_ops"] > 0, cold
    warm = build()
    assert warm["compile_cache"] == "warm" and warm["autotuned_ops"] == 0, warm
    for graphs in ("fxgraph", "aotautograd"):
        shutil.rmtree(folder / graphs, ignore_errors=True)
    kept = build()
    assert kept["fx_cache_misses"] > 0 and kept["fx_cache_hits"] == 0, kept
    assert kept["autotuned_ops"] == 0 and kept["compile_cache"] == "partial", kept
    assert cold["autotune_reads"] == 0 and kept["autotune_reads"] > 0, (cold, kept)
    print(
        f"autotuned ops cold {cold['autotuned_ops']}, compile_s {cold['compile_s']:.1f} / "
        f"{warm['compile_s']:.1f} / {kept['compile_s']:.1f} s (cold / warm / autotuning kept)"
    )


def test_a_process_that_imported_dynamo_first_compiles_under_the_package_cache(tmp_path):
    """A bench or sweep process imports torch._dynamo before its first compile, which writes
    torch's default folder into TORCHINDUCTOR_CACHE_DIR: the build still goes to
    ``$YOLO_SM_CACHE/inductor``, where the next process finds it."""
    from yolo_sm.core.engines.compile_cache import count_files
    from yolo_sm.topics.deploy import collect as cache_builds

    env = cache_builds.child_env("unused")
    for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        env.pop(name)
    env["YOLO_SM_CACHE"] = str(tmp_path)
    code = "import torch._dynamo\n" + _BUILD.replace("max-autotune-no-cudagraphs", "default")

    def build():
        return _build_in_a_process(code, env)

    first = build()
    folder = tmp_path / "inductor"
    assert count_files(folder) > 0, first
    assert first["compile_cache"] == "cold", first
    second = build()
    assert second["compile_cache"] == "warm", second
