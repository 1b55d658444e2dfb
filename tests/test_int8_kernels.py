"""yolo_sm's own int8 convolutions on CPU: the Triton implicit-GEMM kernel and the epilogue run
by Triton's interpreter against the exact emulation, the kernel choice, and the int8_kernels
step's spec and plan parameters."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from yolo_sm.contract.errors import NotAvailableError, UserError


def test_triton_kernels_under_the_interpreter():
    """The Triton convolution and epilogue against the exact emulation, on CPU tensors
    (tests/fixtures/triton_int8_checks.py in a process with TRITON_INTERPRET=1)."""
    pytest.importorskip("triton")
    checks = Path(__file__).parent / "fixtures" / "triton_int8_checks.py"
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(checks)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert re.search(r"\b5 passed\b", done.stdout), done.stdout[-2000:]


def test_kernel_choice_on_a_cpu():
    from yolo_sm.collect.engines import EngineConfig, int8

    assert int8.choose_kernel("cpu") == "emulate"
    assert int8.choose_kernel("cpu", "emulate") == "emulate"
    with pytest.raises(NotAvailableError, match="triton needs a CUDA device"):
        int8.choose_kernel("cpu", "triton")
    with pytest.raises(ValueError, match="unknown int8 kernel"):
        int8.choose_kernel("cpu", "cublas")
    assert EngineConfig(precision="int8", int8_kernel="triton").int8_kernel == "triton"
    with pytest.raises(UserError, match="unknown int8 kernel 'cublas'"):
        EngineConfig(precision="int8", int8_kernel="cublas")


def test_int8_kernels_spec_and_plan_params():
    from yolo_sm.collect.int8_kernels import Int8KernelSpec
    from yolo_sm.contract.plans import check_params

    spec = Int8KernelSpec.from_mapping({"widths": [1, 0.5], "model_kernels": "triton"})
    assert spec.widths == (1.0, 0.5) and spec.model_kernels == ("triton",)
    assert spec.units() == [(1.0, "conv"), (1.0, "model"), (0.5, "conv"), (0.5, "model")]
    assert Int8KernelSpec(model_kernels=()).units() == [(w, "conv") for w in (0.5, 1.0, 2.0)]
    with pytest.raises(UserError, match="unknown conv_kernels"):
        Int8KernelSpec(conv_kernels=("cublas",)).validated()
    with pytest.raises(UserError, match="device must be cuda"):
        Int8KernelSpec(device="cpu").validated()
    with pytest.raises(UserError, match="conv_kernels or model_kernels"):
        Int8KernelSpec(conv_kernels=(), model_kernels=()).validated()
    check_params("int8_kernels", {"widths": [0.5], "conv_kernels": ["triton"]}, "step")
    with pytest.raises(UserError, match="int8_kernels"):
        check_params("int8_kernels", {"kernels": ["triton"]}, "step")
