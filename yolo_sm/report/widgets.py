"""ipywidgets explorers for JupyterLab, built on :mod:`yolo_sm.report.plots`.

Widgets need a live kernel; rendered HTML keeps only their static state, so every notebook shows
a static figure beside each explorer.
"""

from __future__ import annotations

from yolo_sm.analyse import occupancy
from yolo_sm.analyse.occupancy import occupancy_curve
from yolo_sm.report import plots


def occupancy_explorer(
    compute_capability: str = "9.0", threads: int = 256, registers: int = 32, smem_kib: int = 0
):
    """Sliders for block size, registers and shared memory -> occupancy, limiter and curves."""
    import ipywidgets as W
    import pandas as pd
    from IPython.display import display

    cc = W.Dropdown(options=sorted(occupancy.ARCH), value=compute_capability, description="CC")
    t = W.IntSlider(value=threads, min=32, max=1024, step=32, description="threads")
    r = W.IntSlider(value=registers, min=0, max=255, step=1, description="registers")
    s = W.IntSlider(value=smem_kib, min=0, max=227, step=1, description="smem KiB")
    out = W.Output()

    def update(*_):
        with out:
            out.clear_output(wait=True)
            try:
                res = occupancy.theoretical_occupancy(cc.value, t.value, r.value, s.value * 1024)
            except ValueError as e:
                print(e)
                return
            display(pd.DataFrame([res.as_dict()]).T.rename(columns={0: "value"}))
            display(
                plots.plot_occupancy_curves(curves_for(cc.value, t.value, r.value, s.value * 1024))
            )

    for w in (cc, t, r, s):
        w.observe(update, names="value")
    update()
    return W.VBox([W.HBox([cc, t]), W.HBox([r, s]), out])


def curves_for(cc: str, threads: int, registers: int, smem: int):
    """The three what-if curves of one launch stacked into one table (column ``vary``)."""
    import pandas as pd

    parts = []
    for vary in ("threads_per_block", "registers_per_thread", "shared_mem_per_block"):
        c = occupancy_curve(
            cc,
            vary=vary,
            threads_per_block=threads,
            registers_per_thread=registers,
            shared_mem_per_block=smem,
        )
        parts.append(c.assign(vary=vary))
    return pd.concat(parts, ignore_index=True)


def launch_curves(launch: dict):
    """:func:`curves_for` of a launch given as the calculator's arguments
    (:func:`yolo_sm.topics.primer.analyse.flagship_launch`)."""
    return curves_for(
        launch["compute_capability"],
        launch["threads_per_block"],
        launch["registers_per_thread"],
        launch["shared_mem_per_block"],
    )


def launch_explorer(launch: dict):
    """:func:`occupancy_explorer` starting at a launch given as the calculator's arguments
    (shared memory rounded to whole KiB for the slider)."""
    return occupancy_explorer(
        launch["compute_capability"],
        threads=launch["threads_per_block"],
        registers=launch["registers_per_thread"],
        smem_kib=round(launch["shared_mem_per_block"] / 1024),
    )
