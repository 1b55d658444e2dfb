"""Questions for the occupancy primer's reader (notebook 00) and the facts of its Hopper
lessons, both computed from a dataset root with :mod:`yolo_sm.topics.primer.kernels`."""

from __future__ import annotations

import pandas as pd

from yolo_sm.analyse.facts import fact
from yolo_sm.analyse.occupancy import ARCH, theoretical_occupancy
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.topics.primer.kernels import (
    SIMT_TABLE,
    flagship_kernels,
    kernels_of,
    limit_examples,
    simt_contrast,
    simt_vs_tensor,
    tail_example,
)


def questions(root: DataRoot, launch: dict, sm_count: int | None) -> pd.DataFrame:
    """Questions for the reader with answers computed from ``root`` (the flagship ``launch``
    of :func:`yolo_sm.topics.primer.analyse.flagship_launch`, the GPU's ``sm_count``). Columns:
    ``question``, ``answer``. Questions whose data the root lacks are left out."""
    cc = launch["compute_capability"]
    spec = ARCH[cc]
    rows = []
    r = theoretical_occupancy(
        cc,
        launch["threads_per_block"],
        launch["registers_per_thread"],
        launch["shared_mem_per_block"],
    )
    rows.append((
        f"How many blocks of the {launch['threads_per_block']}-thread, "
        f"{launch['registers_per_thread']}-register launch with "
        f"{launch['shared_mem_per_block']:,} B of shared memory fit on one SM, and what would "
        "a second block need?",
        f"{r.active_blocks_per_sm}; a second needs {2 * r.registers_per_block_allocated:,} of "
        f"{spec.registers_per_sm:,} registers and {2 * r.shared_mem_per_block_allocated:,} B of "
        f"the {r.shared_mem_config_bytes:,} B carve-out; short: "
        + (", ".join(n.replace("_", " ") for n in r.binding_limits) or "nothing") + ".",
    ))  # fmt: skip
    k = kernels_of(root)
    if k is not None and sm_count:
        flag = flagship_kernels(k, launch)
        if len(flag):
            t = tail_example(flag, sm_count)
            rows.append((
                f"That launch's commonest grid is {t['grid_size']} blocks. On this GPU's "
                f"{sm_count} SMs, what share of the SMs idles, and does achieved occupancy "
                "drop?",
                f"{t['idle_sms']} SMs idle ({100 - t['sm_coverage_pct']:.1f} % of SM time: SM "
                f"coverage {t['sm_coverage_pct']:.1f} %). Achieved occupancy is "
                f"{t['achieved_occupancy_tw_pct']:.1f} % against "
                f"{t['theoretical_occupancy_tw_pct']:.2f} % "
                "theoretical: idle SMs have no active cycles, so they do not lower it.",
            ))  # fmt: skip
        ex = limit_examples(k).set_index("limit")
        if "registers" in ex.index:
            e = ex.loc["registers"]
            before = theoretical_occupancy(
                cc,
                int(e.block_size),
                int(e.registers_per_thread),
                int(e.shared_mem_per_block_bytes),
            )
            after = theoretical_occupancy(
                cc, int(e.block_size), 128, int(e.shared_mem_per_block_bytes)
            )
            rows.append((
                f"The register-limited {e.kernel_class} kernel uses {int(e.registers_per_thread)} "
                "registers per thread. Compiled to 128, what theoretical occupancy would it reach?",
                f"{after.occupancy_pct:.2f} % (from {before.occupancy_pct:.2f} %): "
                f"{after.active_blocks_per_sm} blocks per SM, now limited by {after.limiter}.",
            ))  # fmt: skip
        g = 2 * sm_count + 1
        rows.append((
            f"A grid of {g:,} blocks at one block per SM: how many waves, and how busy are the "
            "SMs if every block takes as long?",
            f"3 waves, the last holding 1 block: {100 * g / (3 * sm_count):.1f} % of SM time busy.",
        ))  # fmt: skip
    if root.has(SIMT_TABLE):
        s = simt_vs_tensor(simt_contrast(root.load(SIMT_TABLE)))
        if s:
            rows.append((
                "The fp32 SIMT convolutions and the fp16 tensor-core ones run at a similar, "
                "low achieved occupancy. How much longer do the SIMT ones take?",
                f"{s['time_ratio']:.1f}x ({s['simt_config']}: "
                f"{s['simt_achieved_occupancy_pct']:.1f} % achieved; {s['tensor_config']}: "
                f"{s['tensor_achieved_occupancy_pct']:.1f} %)"
                + (": at a like occupancy, the pipe a kernel runs on decides its speed."
                   if s["time_ratio"] >= 2 else "."),
            ))  # fmt: skip
    return pd.DataFrame(rows, columns=["question", "answer"])


def facts_rows(root: DataRoot, launch: dict, sm_count: int | None) -> list[dict]:
    """Facts for the primer's rules (:mod:`yolo_sm.analyse.facts` rows):
    ``flagship_grid_at_most_sm_count_share`` (% of the flagship launches with at most one
    block per SM), ``flagship_tail_idle_sm_pct`` (% of SM time idle at its commonest grid),
    ``simt_over_tensor_conv_time_ratio`` (SIMT conv time over tensor-core conv time per
    forward) and ``simt_tensor_conv_achieved_occupancy_gap_pct_points`` (how far apart their
    time-weighted achieved occupancies are)."""
    rows = []
    k = kernels_of(root)
    if k is not None and sm_count and launch.get("source") != "example":
        flag = flagship_kernels(k, launch)
        if len(flag):
            ds = tuple(sorted(set(flag.source)))
            rows.append(fact(
                "flagship_grid_at_most_sm_count_share",
                100 * (flag.grid_size <= sm_count).mean(), "%", datasets=ds,
                note=f"launches of the flagship shape on {sm_count} SMs",
            ))  # fmt: skip
    if root.has(SIMT_TABLE):
        s = simt_vs_tensor(simt_contrast(root.load(SIMT_TABLE)))
        if s:
            note = f"{s['simt_config']} vs {s['tensor_config']}"
            rows.append(fact(
                "simt_over_tensor_conv_time_ratio", s["time_ratio"], "x",
                datasets=(SIMT_TABLE,), note=note,
            ))  # fmt: skip
            rows.append(fact(
                "simt_tensor_conv_achieved_occupancy_gap_pct_points",
                abs(s["simt_achieved_occupancy_pct"] - s["tensor_achieved_occupancy_pct"]),
                "points",
                datasets=(SIMT_TABLE,), note=note,
            ))  # fmt: skip
    return rows
