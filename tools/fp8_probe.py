"""Which 8-bit convolution paths run on this GPU, how fast, and how exact?

Run on a GPU with the ``nvidia-cudnn-frontend`` package (on an offline host: carried with
``bash tools/offline_gpu.sh wheels 3.12 nvidia-cudnn-frontend``, docs/offline_gpu.md):

    python3 tools/fp8_probe.py --out $OUT/fp8_probe.jsonl

For YOLOv8-like convolution shapes (NHWC, batch 64) it times, side by side in one process:
  * torch fp16 conv (cuDNN, channels_last) + bias + SiLU: the baseline;
  * cuDNN frontend graphs with FP8 E4M3 image and weights, fp32 accumulation, fp16 output,
    with and without a fused scale + bias + SiLU epilogue;
  * 1x1 convolutions as FP8 GEMMs through torch._scaled_mm (per-tensor scales, then per-row /
    per-output-channel scales).
With ``--all-plans N`` it also times the first N of cuDNN's ranked plans of the fused graph one
by one (``tools/fp8_probe.py --all-plans 12 --out $OUT/fp8_plans.jsonl``) and prints the fastest
per shape: whether any cuDNN FP8 kernel beats the fp16 convolution, and by how much,
independent of the engine's time-capped tuning.
Each attempt is recorded (ok or the error) as one JSON line: shape, path, median and IQR of the
CUDA-event times, the speed-up over fp16, and the relative L2 error against the fp16 result.
Nothing here is shipped data: it decides which 8-bit engine yolo_sm builds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import traceback
from functools import partial

SHAPES = [  # (name, N, C, H, K, kernel, stride): YOLOv8 width 1.0 layers at batch 64, 640 px
    ("p3_c2f_3x3", 64, 128, 80, 128, 3, 1),
    ("p4_c2f_3x3", 64, 256, 40, 256, 3, 1),
    ("p5_c2f_3x3", 64, 512, 20, 512, 3, 1),
    ("p3_down_3x3s2", 64, 256, 80, 256, 3, 2),
    ("p3_c2f_1x1", 64, 256, 80, 256, 1, 1),
    ("p4_c2f_1x1", 64, 512, 40, 512, 1, 1),
]
E4M3_MAX = 448.0


def timeit(fn, reps=50, warmup=10):
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    q = statistics.quantiles(times, n=4)
    return statistics.median(times), q[2] - q[0]


def rel_err(y, ref):
    return float((y.float() - ref.float()).norm() / ref.float().norm())


def fp8(t, amax=None):
    """Per-tensor E4M3 quantisation: (fp8 tensor, scale) with t ~= fp8 * scale."""
    import torch

    amax = float(t.abs().max()) if amax is None else amax
    scale = max(amax, 1e-12) / E4M3_MAX
    return (t / scale).to(torch.float8_e4m3fn), scale


def quantize(x):
    import torch

    return (x * 0.5).to(torch.float8_e4m3fn)


def baseline(x, w, b, stride):
    import torch.nn.functional as F

    k = w.shape[-1]
    return lambda: F.silu(F.conv2d(x, w, b, stride=stride, padding=k // 2))


def cudnn_fp8(x, w, b, stride, epilogue, plan=None):
    """A cuDNN frontend graph: FP8 image and weight (NHWC), fp32 accumulation, fp16 out.
    ``plan``: run that index of cuDNN's ranked plans (heuristics A, B, fallback) instead of the
    first that builds; the returned ``run`` carries ``plan_name`` and ``plan_count``."""
    import cudnn
    import torch

    n, c, h, wd = x.shape
    k, _, r, s = w.shape
    xq, sx = fp8(x)
    wq, sw = fp8(w)
    # channels_last tensors: cuDNN wants NCHW dims with NHWC strides
    xq = xq.contiguous(memory_format=torch.channels_last)
    wq = wq.contiguous(memory_format=torch.channels_last)
    handle = cudnn.create_handle()
    g = cudnn.pygraph(
        io_data_type=cudnn.data_type.HALF,
        intermediate_data_type=cudnn.data_type.FLOAT,
        compute_data_type=cudnn.data_type.FLOAT,
        handle=handle,
    )
    X = g.tensor(
        name="X", dim=list(xq.shape), stride=list(xq.stride()), data_type=cudnn.data_type.FP8_E4M3
    )
    W = g.tensor(
        name="W", dim=list(wq.shape), stride=list(wq.stride()), data_type=cudnn.data_type.FP8_E4M3
    )
    pad = r // 2
    Y = g.conv_fprop(
        image=X,
        weight=W,
        padding=[pad, pad],
        stride=[stride, stride],
        dilation=[1, 1],
        compute_data_type=cudnn.data_type.FLOAT,
    )
    feeds = {X: xq, W: wq}
    if epilogue:
        scale = torch.full((1, 1, 1, 1), sx * sw, device="cuda", dtype=torch.float32)
        bias = b.float().reshape(1, k, 1, 1).contiguous(memory_format=torch.channels_last)
        S = g.tensor(
            name="S", dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=cudnn.data_type.FLOAT
        )
        B = g.tensor(
            name="B",
            dim=list(bias.shape),
            stride=list(bias.stride()),
            data_type=cudnn.data_type.FLOAT,
        )
        Y = g.swish(input=g.bias(input=g.scale(input=Y, scale=S), bias=B))
        feeds.update({S: scale, B: bias})
    Y.set_output(True).set_data_type(cudnn.data_type.HALF)
    g.validate()
    g.build_operation_graph()
    modes = [cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK]
    if plan is not None:
        modes.insert(1, cudnn.heur_mode.B)
    g.create_execution_plans(modes)
    g.check_support()
    if plan is None:
        g.build_plans()
        ws_size = g.get_workspace_size()
    else:
        g.build_plan_at_index(plan)
        ws_size = g.get_workspace_size_plan_at_index(plan)
    ho = (h + 2 * pad - r) // stride + 1
    wo = (wd + 2 * pad - s) // stride + 1
    y = torch.empty((n, k, ho, wo), device="cuda", dtype=torch.float16).contiguous(
        memory_format=torch.channels_last
    )
    feeds[Y] = y
    ws = torch.empty(max(ws_size, 1), device="cuda", dtype=torch.uint8)

    def run():
        if plan is None:
            g.execute(feeds, ws, handle=handle)
        else:
            g.execute_plan_at_index(feeds, ws, plan, handle=handle)
        return y

    run.plan_count = g.get_execution_plan_count()
    run.plan_name = g.get_plan_name_at_index(plan) if plan is not None else ""

    if not epilogue:  # raw conv: rescale outside to compare with the fp16 result
        return run, lambda: y.float() * (sx * sw)
    return run, lambda: y


def scaled_mm_1x1(x, w, b, rowwise):
    """1x1 conv as an FP8 GEMM: (N*H*W, C) @ (C, K) through torch._scaled_mm, fp16 or bf16 out."""
    import torch

    n, c, h, wd = x.shape
    k = w.shape[0]
    a = x.permute(0, 2, 3, 1).reshape(-1, c)  # NHWC rows
    wm = w.reshape(k, c)
    if rowwise:
        sa = a.abs().amax(dim=1, keepdim=True).float().clamp(min=1e-12) / E4M3_MAX
        sb = wm.abs().amax(dim=1, keepdim=True).float().clamp(min=1e-12) / E4M3_MAX
        aq = (a / sa).to(torch.float8_e4m3fn)
        bq = (wm / sb).to(torch.float8_e4m3fn)
        scale_a, scale_b, out_dtype = sa, sb.t().contiguous(), torch.bfloat16
    else:
        aq, sa = fp8(a)
        bq, sb = fp8(wm)
        scale_a = torch.tensor(sa, device="cuda")
        scale_b = torch.tensor(sb, device="cuda")
        out_dtype = torch.float16
    bt = bq.t()  # (C, K) column-major, as _scaled_mm wants
    bias = b.to(out_dtype)

    def run():
        y = torch._scaled_mm(
            aq, bt, scale_a=scale_a, scale_b=scale_b, bias=bias, out_dtype=out_dtype
        )
        return torch.nn.functional.silu(y)

    def result():
        return run().reshape(n, h, wd, k).permute(0, 3, 1, 2)

    return run, result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="JSON lines file")
    p.add_argument("--reps", type=int, default=50)
    p.add_argument(
        "--all-plans",
        type=int,
        default=0,
        metavar="N",
        help="also time each of the first N of cuDNN's ranked plans of the fused FP8 graph "
        "(heuristics A, B, fallback): is any of them fast enough?",
    )
    args = p.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("fp8_probe: needs a CUDA GPU", file=sys.stderr)
        return 2
    torch.backends.cudnn.benchmark = True
    try:
        import cudnn

        fe = f"cudnn frontend {cudnn.__version__}, backend {cudnn.backend_version()}"
    except Exception as e:  # noqa: BLE001 - record why, go on with the torch paths
        cudnn, fe = None, f"cudnn frontend unavailable: {e!r}"
    print(fe, "| torch", torch.__version__, "|", torch.cuda.get_device_name())
    gen = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    for name, n, c, h, k, r, stride in SHAPES:
        x = torch.randn(n, c, h, h, device="cuda", dtype=torch.float16, generator=gen)
        x = torch.nn.functional.silu(x).contiguous(memory_format=torch.channels_last)
        w = (
            torch.randn(k, c, r, r, device="cuda", dtype=torch.float16, generator=gen)
            / (c * r * r) ** 0.5
        ).contiguous(memory_format=torch.channels_last)
        b = torch.randn(k, device="cuda", dtype=torch.float16, generator=gen) * 0.1
        base = baseline(x, w, b, stride)
        ref = base()
        flops = 2 * n * k * c * r * r * ref.shape[2] * ref.shape[3]
        t16, iqr16 = timeit(base, args.reps)
        rows.append(
            dict(
                shape=name,
                path="torch_fp16_conv_bias_silu",
                ok=True,
                median_ms=t16,
                iqr_ms=iqr16,
                tflops=flops / t16 / 1e9,
                speedup=1.0,
                rel_err=0.0,
            )
        )
        tq, iqrq = timeit(partial(quantize, x), args.reps)
        rows.append(
            dict(
                shape=name,
                path="quantize_input_fp16_to_e4m3",  # what each fp8 conv adds unless fused
                ok=True,
                median_ms=tq,
                iqr_ms=iqrq,
                tflops=0.0,
                speedup=t16 / tq,
                rel_err=0.0,
            )
        )
        attempts = []
        if cudnn is not None:
            attempts += [
                ("cudnn_fe_fp8_conv", partial(cudnn_fp8, x, w, b, stride, False), False),
                (
                    "cudnn_fe_fp8_conv_scale_bias_swish",
                    partial(cudnn_fp8, x, w, b, stride, True),
                    True,
                ),
            ]
        if cudnn is not None and args.all_plans:
            attempts += [
                (
                    f"cudnn_fe_fp8_fused_plan{i}",
                    partial(cudnn_fp8, x, w, b, stride, True, i),
                    True,
                )
                for i in range(args.all_plans)
            ]
        if r == 1 and stride == 1:
            attempts += [
                ("scaled_mm_fp8_per_tensor", partial(scaled_mm_1x1, x, w, b, False), True),
                ("scaled_mm_fp8_rowwise", partial(scaled_mm_1x1, x, w, b, True), True),
            ]
        for path, build, fused in attempts:
            row = dict(shape=name, path=path)
            try:
                run, result = build()
                run()
                torch.cuda.synchronize()
                y = result()
                if not fused:  # compare the raw conv with the fp16 conv before bias/SiLU
                    ref_raw = torch.nn.functional.conv2d(x, w, None, stride=stride, padding=r // 2)
                    err = rel_err(y, ref_raw)
                else:
                    err = rel_err(y, ref)
                t, iqr = timeit(run, args.reps)
                if getattr(run, "plan_name", ""):
                    row.update(plan_name=run.plan_name, plan_count=run.plan_count)
                row.update(
                    ok=True,
                    median_ms=t,
                    iqr_ms=iqr,
                    tflops=flops / t / 1e9,
                    speedup=t16 / t,
                    rel_err=err,
                )
            except Exception as e:  # noqa: BLE001 - a probe records what fails and why
                row.update(
                    ok=False,
                    error=f"{type(e).__name__}: {e}"[:500],
                    where=traceback.format_exc().splitlines()[-3:],
                )
            rows.append(row)
    with open(args.out, "w") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    for shape in dict.fromkeys(r["shape"] for r in rows):
        plans = [r for r in rows if r["shape"] == shape and r["ok"] and "_plan" in r["path"]]
        if plans:
            best = max(plans, key=lambda r: r["speedup"])
            print(
                f"{shape}: {len(plans)} plans ran (of {best['plan_count']}); fastest "
                f"{best['plan_name']} x{best['speedup']:.2f} vs fp16 conv+bias+SiLU"
            )
    for row in rows:
        if row["ok"]:
            print(
                f"{row['shape']:<16} {row['path']:<36} {row['median_ms']:.3f} ms "
                f"{row['tflops']:.0f} TFLOP/s x{row['speedup']:.2f} err {row['rel_err']:.2e}"
            )
        else:
            print(f"{row['shape']:<16} {row['path']:<36} FAILED {row['error'][:120]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
