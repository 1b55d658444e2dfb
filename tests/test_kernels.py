"""Kernel classification: table-driven on real H200 kernel names, and coverage on real forwards."""

import pytest

from yolo_sm.analyse import kernels
from yolo_sm.contract import datasets

CASES = [
    # (name as Nsight Compute prints it, class, precision)
    (
        "sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_"
        "warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cudnn",
        "tensor_core_conv",
        "f16",
    ),
    (
        "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize64x64x64_"
        "warpgroupsize1x1x1",
        "tensor_core_conv",
        "bf16",
    ),
    (
        "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x64x32_"
        "warpgroupsize1x1x1",
        "tensor_core_conv",
        "tf32",
    ),
    (
        "sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize256x64x8_stage3_"
        "warpsize4x1x1_g1_ffma_aligna4_alignc4_execute_kernel__5x_cudnn",
        "simt_conv",
        "f32",
    ),
    (
        "void cutlass__5x_cudnn::Kernel<cutlass_tensorop_f16_s16816fprop_optimized_f16_64x64_64x5_"
        "nhwc_align8>(T1::Params)",
        "tensor_core_conv",
        "f16",
    ),
    (
        "void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, false, true>",
        "simt_conv",
        "f32",
    ),
    ("void cnn::conv2d_grouped_direct_kernel<0, 1, 0, __half, float>", "simt_conv", "f32"),
    ("nvjet_sm90_hsh_128x160_64x5_2x1_v_bz_TNT", "tensor_core_gemm", "f16"),
    # cuBLAS nvjet names read A/B type, compute type, C type: h = fp16, s = fp32, t = bf16
    # (seen only in the bf16 forward of the H200 capture)
    ("nvjet_sm90_tst_64x128_64x8_4x2_h_bz_NNN", "tensor_core_gemm", "bf16"),
    (
        "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x128_32x3_tn_align4>(T1::Params)",
        "tensor_core_gemm",
        "tf32",
    ),
    (
        "void engines_precompiled::nchwToNhwcKernel<__half, __half, float, false, true>",
        "layout_transform",
        "",
    ),
    (
        "void at::<unnamed>::CatArrayBatchedCopy_aligned16_contig<at::<unnamed>::OpaqueType<2>>",
        "copy_concat",
        "",
    ),
    (
        "void at::elementwise_kernel<128, 4, void at::gpu_kernel_impl_nocast<"
        "at::direct_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda() (instance 3)]",
        "copy_concat",
        "",
    ),
    (
        "void at::elementwise_kernel<128, 4, void at::gpu_kernel_impl_nocast<"
        "at::CUDAFunctor_add<c10::Half>>(at::TensorIteratorBase &, const T1 &)::"
        "[lambda(int) (instance 1)]>(int, T3)",
        "elementwise",
        "",
    ),
    (
        "void at::vectorized_elementwise_kernel<8, at::silu_kernel(at::TensorIteratorBase &)",
        "elementwise",
        "",
    ),
    ("void at::<unnamed>::max_pool_forward_nhwc<c10::Half, float>", "pooling_upsample", ""),
    (
        "void at::<unnamed>::upsample_nearest2d_nhwc_out_frame<c10::Half, &nearest_neighbor>",
        "pooling_upsample",
        "",
    ),
    (
        "void at::<unnamed>::cunn_SoftMaxForward<4, float, float, float, at::<unnamed>::Epilogue>",
        "reduction",
        "",
    ),
    ("triton_poi_fused_add_silu_0", "triton", ""),
    ("some_kernel_nobody_knows", "other", ""),
    (
        "void nhwcAddPaddingKernel<__half, __half, float, true, (cudnnKernelDataType_t)0>"
        "(int, int, int, int, int, int, int, __half const*, __half*, cudnn::reduced_divisor)",
        "layout_transform",
        "",
    ),
    (
        "void cask_plugin__5x_cudnn::xmma__5x_cudnn::init_device_workspace_kernel<false>(int*)",
        "copy_concat",
        "",
    ),
]


@pytest.mark.parametrize("name, cls, precision", CASES)
def test_classify_real_names(name, cls, precision):
    assert kernels.classify(name) == cls
    assert kernels.precision_of(name, cls) == precision


def test_ops_are_named():
    assert kernels.op_of(CASES[13][0]) == "add"
    assert kernels.op_of(CASES[14][0]) == "silu"
    assert kernels.op_of(CASES[11][0]) == "cat"


def test_under_5_percent_of_time_unclassified_on_every_h200_forward():
    df = kernels.add_kernel_class(datasets.load("h200/ncu_occupancy"))
    shares = kernels.class_shares(df, by=["nvtx_range"])
    other = shares[shares.kernel_class == "other"].set_index("nvtx_range").time_share
    assert set(shares.nvtx_range) == set(df.nvtx_range)
    assert (other.reindex(df.nvtx_range.unique()).fillna(0) < 0.05).all()
    # the shares of each forward add up to one
    assert shares.groupby("nvtx_range").time_share.sum().round(9).eq(1).all()
    # fp32 (TF32 off) runs its convolutions on SIMT kernels, fp16 on tensor cores
    conv = shares.pivot_table(index="nvtx_range", columns="kernel_class", values="time_share")
    assert conv.loc["yolov8_w1.0_fp32_nchw_b8", "simt_conv"] > 0.5
    assert conv.loc["yolov8_w1.0_fp16_nhwc_b8", "tensor_core_conv"] > 0.2
    assert conv.fillna(0).loc["yolov8_w1.0_fp16_nhwc_b8", "simt_conv"] == 0
