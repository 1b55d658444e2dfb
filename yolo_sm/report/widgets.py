"""ipywidgets explorers for JupyterLab (live kernels only: notebooks show a static figure too)."""

from __future__ import annotations

from yolo_sm.analyse import occupancy
from yolo_sm.analyse.occupancy import VARY, occupancy_curve
from yolo_sm.report import plots


def explorer(controls, draw):
    """ipywidgets: ``controls`` (two a row) over an output showing ``draw(*their values)``'s
    items (a ValueError printed)."""
    import ipywidgets as W
    from IPython.display import display

    out = W.Output()

    def update(*_):
        with out:
            out.clear_output(wait=True)
            try:
                items = draw(*(c.value for c in controls))
            except ValueError as e:
                print(e)
                return
            for item in items:
                display(item)

    for c in controls:
        c.observe(update, names="value")
    update()
    return W.VBox([*(W.HBox(controls[i : i + 2]) for i in range(0, len(controls), 2)), out])


def occupancy_explorer(
    compute_capability: str = "9.0", threads: int = 256, registers: int = 32, smem_kib: int = 0
):
    """Sliders for block size, registers and shared memory -> occupancy, limiter and curves."""
    import ipywidgets as W
    import pandas as pd

    cc = W.Dropdown(options=sorted(occupancy.ARCH), value=compute_capability, description="CC")
    t = W.IntSlider(value=threads, min=32, max=1024, step=32, description="threads")
    r = W.IntSlider(value=registers, min=0, max=255, step=1, description="registers")
    s = W.IntSlider(value=smem_kib, min=0, max=227, step=1, description="smem KiB")

    def draw(cc, threads, registers, smem_kib):
        res = occupancy.theoretical_occupancy(cc, threads, registers, smem_kib * 1024)
        curves = curves_for(cc, threads, registers, smem_kib * 1024)
        table = pd.DataFrame([res.as_dict()]).T.rename(columns={0: "value"})
        return [table, plots.plot_occupancy_curves(curves)]

    return explorer([cc, t, r, s], draw)


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
