"""Headline findings of the primer notebook, as rules over the facts of
:func:`yolo_sm.topics.primer.analyse.facts`."""

from __future__ import annotations

from yolo_sm.report.rules import Rule, check_unique
from yolo_sm.topics.primer.analyse import NCU, NCU_TABLES
from yolo_sm.topics.primer.kernels import SIMT_TABLE

GROUP = "00_occupancy_primer"

#: One rule per headline finding (see :class:`yolo_sm.report.rules.Rule`).
RULES: tuple[Rule, ...] = check_unique(
    (
        Rule(
            id="primer_calculator_matches_ncu",
            statement="The occupancy calculator gives Nsight Compute's theoretical occupancy "
            "on every distinct launch shape of the root's Nsight Compute tables",
            fact="calculator_mismatch_share",
            op="<=",
            threshold=0.0,
            partly=1.0,
            unit="%",
            datasets=NCU_TABLES,
            group=GROUP,
        ),
        Rule(
            id="primer_flagship_two_limits",
            statement="The launch holding most tensor-core convolution time is capped at its "
            "active blocks by registers and shared memory alike",
            fact="flagship_binding_resource_limits",
            op=">=",
            threshold=2.0,
            partly=1.0,
            unit="limits",
            datasets=(NCU,),
            group=GROUP,
        ),
        Rule(
            id="primer_flagship_one_wave",
            statement="Every launch of that shape puts at most one block on each SM (its grid "
            "is at most the SM count), as a persistent tile scheduler does",
            fact="flagship_grid_at_most_sm_count_share",
            op=">=",
            threshold=100.0,
            partly=50.0,
            unit="%",
            datasets=NCU_TABLES,
            group=GROUP,
        ),
        Rule(
            id="primer_simt_conv_slow",
            statement="The SIMT fp32 convolutions take at least 5x the time of the fastest "
            "tensor-core convolutions per forward",
            fact="simt_over_tensor_conv_time_ratio",
            op=">=",
            threshold=5.0,
            partly=2.0,
            unit="x",
            datasets=(SIMT_TABLE,),
            group=GROUP,
        ),
        Rule(
            id="primer_simt_conv_like_occupancy",
            statement="The SIMT fp32 convolutions run at an achieved occupancy within 10 points "
            "of the tensor-core convolutions' (occupancy does not tell the slow from the fast)",
            fact="simt_tensor_conv_achieved_occupancy_gap_pct_points",
            op="<=",
            threshold=10.0,
            partly=20.0,
            unit="points",
            datasets=(SIMT_TABLE,),
            group=GROUP,
        ),
        Rule(
            id="primer_tc_conv_below_60",
            statement="Most tensor-core convolution time of the forward runs below 60 % "
            "achieved occupancy",
            fact="tc_conv_time_share_below_60_achieved",
            op=">=",
            threshold=50.0,
            unit="%",
            datasets=(NCU,),
            group=GROUP,
        ),
        Rule(
            id="primer_memory_kernels_high_occupancy",
            statement="The data-movement kernels (elementwise, copy/concat, pooling/upsample) "
            "run at least 20 points above the tensor-core convolutions in achieved occupancy",
            fact="memory_minus_tc_conv_achieved_occupancy_pct_points",
            op=">=",
            threshold=20.0,
            partly=5.0,
            unit="points",
            datasets=(NCU,),
            group=GROUP,
        ),
    )
)
