"""Every Triton kernel of the package compiles for the H200's architecture (sm_90) on a machine
without a GPU: Triton lowers each kernel through its IRs to PTX and ptxas assembles a cubin,
with the argument types and constants its launch site passes. The interpreter tests check what
the kernels compute; this checks that the code the GPU gets exists (a kernel that does not
compile for the GPU falls back to torch ops at run time, slower and with a warning)."""

import pytest

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

#: the H200: compute capability 9.0, 32 threads a warp
SM_90 = GPUTarget("cuda", 90, 32)


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """Compile into a fresh cache, so that a kernel is compiled here, not read back."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))


def compile_for_sm90(kernel, types: dict, constants: dict, **options):
    """``kernel`` (a JITFunction) compiled for sm_90: ``types`` gives each runtime argument's
    Triton type (``*fp16``, ``i32``, ``fp32``...), ``constants`` each constexpr's value."""
    fn = kernel
    while not isinstance(fn, JITFunction):  # an autotuned kernel wraps the JITFunction
        fn = fn.fn
    names = fn.arg_names
    missing = set(names) - set(types) - set(constants)
    assert not missing, f"no type or constant for {sorted(missing)}"
    signature = {n: "constexpr" if n in constants else types[n] for n in names}
    constexprs = {(names.index(n),): v for n, v in constants.items()}
    src = ASTSource(fn=fn, signature=signature, constexprs=constexprs)
    return triton.compile(src, target=SM_90, options=options)


def assembled(compiled) -> bool:
    """A cubin came out, for sm_90."""
    ptx = compiled.asm["ptx"]
    return len(compiled.asm["cubin"]) > 0 and ".target sm_90" in ptx


def test_the_compile_check_fails_on_a_kernel_that_cannot_compile():
    @triton.jit
    def broken(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.dot(offs, offs))  # a dot of 1-D operands does not lower

    with pytest.raises(Exception):  # noqa: B017 - Triton's own compilation error type
        compile_for_sm90(broken, {"x_ptr": "*fp32"}, {"BLOCK": 32})


@pytest.mark.parametrize("dtype", ["*fp16", "*bf16", "*fp32"])
def test_the_int8_and_fp8_quantisers(dtype):
    from yolo_sm.core.engines import qconv

    kernel = qconv._triton_quantize()
    for out, limit, rounding in (("*i8", 127.0, True), ("*fp8e4nv", 448.0, False)):
        types = {"x_ptr": dtype, "y_ptr": out, "n": "i32", "inv_scale": "fp32"}
        constants = {"LIMIT": limit, "ROUND": rounding, "BLOCK": 4096}
        assert assembled(compile_for_sm90(kernel, types, constants))


#: (tile, quantize, filter size): every tile with both filter sizes, and every tile and filter
#: size with and without the in-kernel quantisation (each pair of choices, not all 12
#: triples: a 3x3 filter on the 128 x 64 tile alone takes about 16 s to compile)
TILE_CASES = [(0, True, 3), (1, False, 3), (2, True, 3), (0, False, 1), (1, True, 1), (2, False, 1)]


@pytest.mark.parametrize(("tile", "quantize", "rs"), TILE_CASES)
def test_the_int8_implicit_gemm_convolution_for_each_tile(tile, quantize, rs):
    from yolo_sm.core.engines import int8_triton

    conv, _, _ = int8_triton.build_kernels()
    m, n, k, warps, stages = int8_triton.TILES[tile]
    ints = ("M", "H", "W", "C", "K", "HO", "WO", "STRIDE_H", "STRIDE_W", "PAD_H", "PAD_W")
    types = {
        "x_ptr": "*fp16" if quantize else "*i8",
        "w_ptr": "*i8",
        "scale_ptr": "*fp32",
        "bias_ptr": "*fp32",
        "y_ptr": "*fp16",
        "inv_in_scale": "fp32",
        **dict.fromkeys(ints, "i32"),
    }
    constants = {
        "R": rs,
        "S": rs,
        "HAS_BIAS": True,
        "SILU": True,
        "QUANTIZE": quantize,
        "BLOCK_M": m,
        "BLOCK_N": n,
        "BLOCK_K": k,
        "GROUP_M": 8,
    }
    out = compile_for_sm90(conv, types, constants, num_warps=warps, num_stages=stages)
    assert assembled(out)
    # the int32 accumulation runs on the tensor cores: an int8 MMA in the PTX
    assert "s8.s8" in out.asm["ptx"]


def test_the_int8_dequantising_epilogue():
    from yolo_sm.core.engines import int8_triton

    _, epilogue, _ = int8_triton.build_kernels()
    types = {
        "acc_ptr": "*i32",
        "scale_ptr": "*fp32",
        "bias_ptr": "*fp32",
        "y_ptr": "*fp16",
        "M": "i32",
        "K": "i32",
    }
    constants = {"HAS_BIAS": True, "SILU": True, "BLOCK_M": 64, "BLOCK_N": 64}
    assert assembled(compile_for_sm90(epilogue, types, constants))


@pytest.mark.parametrize("same_class", [True, False])
def test_the_nms_kernels(same_class):
    from yolo_sm.core import nms

    boxes = {"bx": "*fp32", "cls": "*i64", "valid": "*u8", "width": "i32", "iou": "fp32"}
    walk = nms._define_walk(triton, tl)
    types = {**boxes, "out": "*i32", "words": "i32"}
    consts = {"SAME_CLASS": same_class, "WB": nms.OVERLAP_BITS_WB}
    assert assembled(compile_for_sm90(walk["overlap_bits"], types, consts))
    types = {"bits": "*i32", "valid": "*u8", "keep": "*u8", "width": "i32", "words": "i32"}
    assert assembled(compile_for_sm90(walk["walk"], types, {"WORDS": 32}, num_warps=1))


@pytest.mark.parametrize("resize", [True, False])
@pytest.mark.parametrize("dtype", ["*fp16", "*bf16", "*fp32"])
def test_the_letterbox_kernel(resize, dtype):
    from yolo_sm.core import pipeline

    letterbox = pipeline._define_letterbox(triton, tl)
    ints = ("H", "W", "new_h", "new_w", "top", "left", "sb", "sc", "sy", "sx", "S")
    types = {"src": "*u8", "out": dtype, "scale_h": "fp32", "scale_w": "fp32"}
    types.update(dict.fromkeys(ints, "i32"))
    assert assembled(compile_for_sm90(letterbox, types, {"RESIZE": resize, "BLOCK": 256}))
