"""The diagnostic tools in tools/ that have a CPU run, and the offline-host helper."""

import importlib.util
import os
import subprocess
from pathlib import Path

TOOLS = Path(__file__).resolve().parent.parent / "tools"


def _tool(name):
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_fp16_layer_error_finds_the_attention_block_on_the_cpu(capsys):
    tool = _tool("fp16_layer_error")
    argv = ["--family", "yolo11", "--scales", "n", "--imgsz", "64", "--batch", "1"]
    assert tool.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("yolo11 n 64 px: head ")
    layers = [ln.split() for ln in lines[1:] if ln.strip() and not ln.strip().startswith("att")]
    assert len(layers) == 24 and all(0 <= float(parts[1]) < 1 for parts in layers)
    assert any("C2PSA" in parts[0] for parts in layers)
    assert any(ln.strip().startswith("attention ") for ln in lines)  # C2PSA's logits reported


def test_offline_helper_sets_up_a_source_run(tmp_path):
    script = (
        f"cd {tmp_path} && source {TOOLS / 'offline_gpu.sh'} && "
        'echo "$PYTHONPATH" && echo "$OUT" && type -t yolo_sm'
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["OUT"] = str(tmp_path / "out")
    res = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    path, out, kind = res.stdout.split()
    assert path.split(":")[:2] == ["/tmp/site", str(tmp_path)]
    assert out == env["OUT"] and (tmp_path / "out").is_dir() and kind == "function"
    res = subprocess.run(["bash", str(TOOLS / "offline_gpu.sh")], capture_output=True, text=True)
    assert res.returncode == 2 and "usage" in res.stderr


def test_offline_helper_installs_the_distributed_wheels_too(tmp_path):
    # a broken wheel in .whl-dist (tools/wheels_distributed.sh) stops the set-up and says where
    (tmp_path / ".whl-dist").mkdir()
    (tmp_path / ".whl-dist" / "broken-1.0-py3-none-any.whl").write_bytes(b"not a zip")
    script = f"cd {tmp_path} && source {TOOLS / 'offline_gpu.sh'} && echo set-up"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["OUT"] = str(tmp_path / "out")
    res = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)
    assert res.returncode == 1 and "set-up" not in res.stdout
    assert "wheel install from .whl-dist failed" in res.stderr
