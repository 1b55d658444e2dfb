"""primer_plots: split from analyse.primer."""

from __future__ import annotations

from yolo_sm.analyse.kernels import add_kernel_class
from yolo_sm.analyse.primer import pipe_vs_occupancy, tensor_core_occupancy_levels, time_weighted
from yolo_sm.report.colors import TEMPLATE


def plot_pipe_vs_occupancy(df, *, title=None):
    """Tensor-pipe utilisation against achieved occupancy, one marker per kernel (area = time)."""
    import plotly.express as px

    d = df.assign(short=df.kernel_name.str.slice(0, 70))
    return px.scatter(
        d,
        x="achieved_occupancy_pct",
        y="tensor_pipe_pct",
        color="kernel_class",
        size="duration_us",
        facet_col="config" if d.config.nunique() > 1 else None,
        facet_col_wrap=3,
        hover_data=["short", "block_size", "registers_per_thread", "sm_throughput_pct"],
        template=TEMPLATE,
        title=title or "Tensor pipes busy vs achieved occupancy, per kernel (area = time)",
        labels={
            "achieved_occupancy_pct": "achieved occupancy %",
            "tensor_pipe_pct": "tensor pipe active %",
        },
    )


def findings(ncu_yolo, config: str, wide, trace, layers) -> str:
    """The primer's findings as markdown, every number computed from the tables given."""
    k = add_kernel_class(ncu_yolo[ncu_yolo.config == config])
    total = k.duration_us.sum()
    tc = k[k.kernel_class == "tensor_core_conv"]
    levels = tensor_core_occupancy_levels(ncu_yolo[ncu_yolo.config == config]).iloc[0]
    mem = k[k.kernel_class.isin(["elementwise", "copy_concat", "pooling_upsample"])]
    w2 = pipe_vs_occupancy(wide)
    w2 = w2[(w2.config == w2.config.iloc[-1]) & (w2.kernel_class == "tensor_core_conv")]
    big = wide.config.iloc[-1]
    fwd = trace[(trace.config == config) & (trace.iteration == 0)]
    est = time_weighted(fwd, "est_occupancy_pct")
    theo = time_weighted(fwd, "theoretical_occupancy_pct")
    gap = (layers.est_occupancy_tw_pct - layers.ncu_achieved_occupancy_tw_pct).abs()
    return "\n".join(
        [
            f"- In `{config}` the tensor-core convolutions run at "
            f"**{time_weighted(tc, 'theoretical_occupancy_pct'):.1f} %** theoretical and "
            f"{time_weighted(tc, 'achieved_occupancy_pct'):.1f} % achieved occupancy "
            f"(time-weighted); {levels.time_share:.0%} of their time is in launches at "
            f"{levels.theoretical_occupancy_pct:g} %: {int(levels.block_size)} threads per block "
            f"with {int(levels.registers_per_thread)} registers per thread, one block per SM.",
            f"- The kernels at high occupancy in the same forward are the elementwise, copy/concat "
            f"and upsampling kernels: {mem.duration_us.sum() / total:.0%} of the kernel time at "
            f"{time_weighted(mem, 'achieved_occupancy_pct'):.0f} % achieved occupancy, against "
            f"{tc.duration_us.sum() / total:.0%} for the convolutions.",
            f"- Low occupancy is not idle tensor cores: in the wide conv stack (`{big}`, full "
            f"metric set) the tensor-core convolutions run at "
            f"{time_weighted(w2, 'achieved_occupancy_pct'):.1f} % achieved occupancy and keep "
            f"the tensor pipes **{time_weighted(w2, 'tensor_pipe_pct'):.0f} %** busy "
            f"(time-weighted). The rule 'below 60 % wastes the GPU' flags the kernels that do the "
            f"arithmetic and passes the memory-bound ones.",
            f"- Kineto's `est. achieved occupancy` is the calculator's value capped by the grid, "
            f"not a measurement: over the trace of `{config}` it averages {est:.1f} % against "
            f"{theo:.1f} % theoretical; per layer it differs from ncu's achieved occupancy by "
            f"{gap.median():.1f} points (median), up to {gap.max():.0f} points.",
        ]
    )
