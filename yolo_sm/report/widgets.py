"""ipywidgets explorers for JupyterLab (live kernels only: notebooks show a static figure too)."""

from __future__ import annotations

from yolo_sm.analyse import occupancy
from yolo_sm.analyse.occupancy import VARY, occupancy_curve
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


def curves_for(
    compute_capability: str,
    threads_per_block: int,
    registers_per_thread: int,
    shared_mem_per_block: int,
):
    """The three what-if curves of one launch stacked into one table (column ``vary``)."""
    import pandas as pd

    launch = {
        "threads_per_block": threads_per_block,
        "registers_per_thread": registers_per_thread,
        "shared_mem_per_block": shared_mem_per_block,
    }
    parts = [occupancy_curve(compute_capability, vary=v, **launch).assign(vary=v) for v in VARY]
    return pd.concat(parts, ignore_index=True)


def launch_curves(launch: dict):
    """:func:`curves_for` of a launch given as the calculator's arguments."""
    return curves_for(*(launch[k] for k in ("compute_capability", *VARY)))


def launch_explorer(launch: dict):
    """:func:`occupancy_explorer` starting at a launch given as the calculator's arguments."""
    return occupancy_explorer(
        launch["compute_capability"],
        threads=launch["threads_per_block"],
        registers=launch["registers_per_thread"],
        smem_kib=round(launch["shared_mem_per_block"] / 1024),
    )
