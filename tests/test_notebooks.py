"""Every notebook executes on CPU from the H200 root and from the CPU root, and none is committed
with outputs; rendering injects the root (and its notebook parameters) after the parameters
cell."""

import json
import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")  # report extra

NOTEBOOKS = sorted(
    (Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb")
)
ROOTS = ("h200", "h100", "cpu")


def test_there_are_notebooks():
    assert NOTEBOOKS, "no NN_topic.ipynb notebooks found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stripped_and_has_parameters(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code), (
        "strip outputs: make strip"
    )
    params = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert params and re.search(r"^DATA\s*=", params[0].source, re.M), "needs DATA in parameters"
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")


def _outputs_text(nb) -> str:
    """Everything the executed notebook shows (text, HTML, markdown, figure JSON)."""
    return "\n".join(
        json.dumps(o, default=str) for c in nb.cells if c.cell_type == "code" for o in c.outputs
    )


def _figures_in(html):
    """Every plotly figure of a rendered page, rebuilt from its ``Plotly.newPlot`` call (not
    validated again: plotly wrote it, and validating takes most of a second a page)."""
    import plotly.graph_objects as go

    dec = json.JSONDecoder()
    figs = []
    for m in re.finditer(r'Plotly\.newPlot\(\s*"[^"]+",\s*', html):
        data, end = dec.raw_decode(html, m.end())
        layout, _ = dec.raw_decode(html, html.index("{", end))
        figs.append(go.Figure({"data": data, "layout": layout}, _validate=False))
    return figs


def _executes_and_renders(path, data, figures=True):
    from tests.notebook_cache import executed
    from yolo_sm.report.render import to_html

    nb = executed(path, data)  # the site test renders these executions again
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"
    ]
    assert not errors, errors[0].get("evalue") if errors else ""
    html = to_html(nb)
    assert "Plotly.newPlot" in html or not figures, "figures must render in the HTML"
    # self-contained: plotly.js is inlined, no script is loaded from the network
    assert not re.search(r"<script[^>]+src=[\"']https?://", html)
    # the page is titled by the notebook's heading ("00 · Occupancy primer ..."), not "Notebook"
    assert re.search(r"<title>\d\d ", html), re.search(r"<title>[^<]*", html)
    # every figure: axis titles in words, categories in the one mapping's colours
    from tests.figure_checks import problems

    bad = {f.layout.title.text: p for f in _figures_in(html) if (p := problems(f))}
    assert not bad, bad
    return nb, html


@pytest.mark.notebooks
@pytest.mark.parametrize("data", ROOTS)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes(path, data):
    # every notebook draws from the H200 root; the quick plan's H100 root and a CPU root may
    # lack every table a figure needs
    nb, _ = _executes_and_renders(path, data, figures=data == "h200")
    if data != "h200" and not path.name.startswith("12_"):  # 12 compares with another GPU
        assert "H200" not in _outputs_text(nb)  # the machine comes from provenance only


#: (notebook, dataset) of the one-step roots: every notebook from a bench; the notebooks that
#: find tables by role (11, 12) also from a trace that attributes no kernel to a layer (a
#: compiled graph) and from an Nsight Compute pass without occupancy
ONE_STEP = [(p, "bench_autotune") for p in NOTEBOOKS] + [
    (p, d)
    for p in NOTEBOOKS
    if p.name.startswith(("11_", "12_"))
    for d in ("trace_compile_w1_b64", "ncu_throughput_w1")
]


@pytest.mark.notebooks
@pytest.mark.parametrize(("path", "dataset"), ONE_STEP, ids=lambda x: getattr(x, "name", x))
def test_notebook_executes_on_a_root_of_one_step(path, dataset, make_root):
    """A root of one plan step (a machine that has collected little so far) renders every
    notebook: each section it cannot draw says so in a line instead of failing."""
    root = make_root("one_step", [dataset])
    nb, _ = _executes_and_renders(path, root, figures=False)
    two_roots = path.name.startswith("12_")  # the root against another: no point in common
    lacks = "No sweep point was measured on both" if two_roots else "holds no"
    assert lacks in _outputs_text(nb)


# --- the rendering mechanism, on a notebook of its own ---------------------------------------

PROBE = """
from yolo_sm.contract.datasets import open_root
data = open_root(DATA)
print("device:", data.device_name())
print("sweep:", SWEEP, data.has(SWEEP))
print(data.missing("ncu_width_b8") if not data.has("ncu_width_b8") else "has ncu_width_b8")
"""


@pytest.fixture
def probe_notebook(tmp_path):
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# 99 · which root?"),
            nbformat.v4.new_code_cell(
                'DATA = "h200"\nSWEEP = "sweep_fp16_nhwc"', metadata={"tags": ["parameters"]}
            ),
            nbformat.v4.new_code_cell(PROBE),
        ]
    )
    folder = tmp_path / "nb"
    folder.mkdir()
    nbformat.write(nb, folder / "99_probe.ipynb")
    return folder


def _stream(nb) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)


def test_render_injects_the_root_and_its_notebook_parameters(probe_notebook, tmp_path, make_root):
    import yaml

    from yolo_sm.report.render import execute, prepare, render_site

    root = make_root("mini", ["sweep_1280"])  # a root with one sweep and no Nsight Compute
    (root / "notebook_parameters.yaml").write_text(
        yaml.safe_dump({"99": {"SWEEP": "sweep_other"}, "99_probe": {"SWEEP": "sweep_1280"}})
    )
    nb = prepare(probe_notebook / "99_probe.ipynb", root)
    tags = [c.metadata.get("tags", []) for c in nb.cells]
    assert tags[1] == ["parameters"] and tags[2] == ["injected-parameters"]
    out = _stream(execute(probe_notebook / "99_probe.ipynb", data=root))
    assert "sweep: sweep_1280 True" in out  # the full name's entry wins over the number's
    assert "device: NVIDIA H200" in out  # the copied table's provenance
    missing = [ln for ln in out.splitlines() if "ncu_width_b8" in ln]
    assert len(missing) == 1 and "--only ncu_width_b8" in missing[0]

    index = render_site(probe_notebook, tmp_path / "site", data=root)
    assert (tmp_path / "site" / "99_probe.html").exists()
    assert "NVIDIA H200" in index.read_text() and "99_probe.html" in index.read_text()
    # the root was injected by its absolute path; no page shows a local path
    assert str(root) in prepare(probe_notebook / "99_probe.ipynb", root).cells[2].source
    for page in (tmp_path / "site").glob("*.html"):
        text = page.read_text()
        assert str(tmp_path) not in text and str(Path.cwd()) not in text, page.name
        assert str(Path(__file__).resolve().parents[1]) not in text, page.name


def test_render_from_the_cpu_root_names_its_machine(probe_notebook):
    from yolo_sm.contract.datasets import open_root
    from yolo_sm.report.render import execute

    nb = execute(probe_notebook / "99_probe.ipynb", data="cpu")
    out = _stream(nb)
    assert f"device: {open_root('cpu').device_name()}" in out
    assert "DATA = 'cpu'" in nb.cells[2].source
    # a root given as an object or as its folder is injected by name, a root elsewhere by path
    from yolo_sm.report.render import prepare

    for given in (open_root("cpu"), open_root("cpu").path):
        assert "DATA = 'cpu'" in prepare(probe_notebook / "99_probe.ipynb", given).cells[2].source
    assert "H200" not in _outputs_text(nb)
    plain = _stream(execute(probe_notebook / "99_probe.ipynb"))  # the notebook's own DATA
    assert "device: NVIDIA H200" in plain and "has ncu_width_b8" in plain


def test_render_refuses_an_unknown_root(probe_notebook, tmp_path):
    from yolo_sm.contract.errors import UserError
    from yolo_sm.report.render import render_site

    with pytest.raises(UserError, match="no dataset root"):
        render_site(probe_notebook, tmp_path / "site", data="no_such_root")


@pytest.mark.notebooks
def test_fast_engines_notebook_on_the_synthetic_bench(tmp_path, make_root):
    """08 executes and renders from a root holding the synthetic bench fixture beside the real
    Kineto kernels of the eager fp16, fp8 and compiled engines."""
    from tests.fixtures.synthetic_bench import ship

    root = make_root("h200", ["trace_fp8_w1_b64", "trace_compile_w1_b64"])
    ship(root.parent)  # registers the fixture in <tmp>/h200/manifest.json
    _executes_and_renders(NOTEBOOKS[0].parent / "10_fast_engines.ipynb", root)


# --- notebooks 11 and 12 on roots of their own -----------------------------------------------


def _with_parameters(path, folder, **params):
    """A copy of notebook ``path`` in ``folder`` whose parameters cell ends with ``params``."""
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    cell.source += "\n" + "\n".join(f"{k} = {v!r}" for k, v in params.items())
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / path.name)
    return folder / path.name


def _repeat_root(tmp_path):
    """The second H200 collection: data/h200_repeat where it is shipped, else one cut from the
    H200 root's own re-measured points (tests/fixtures/one_model.py)."""
    from tests.fixtures.one_model import repeat_root
    from yolo_sm.contract.datasets import data_dir

    shipped = data_dir() / "h200_repeat"
    return shipped if (shipped / "manifest.json").exists() else repeat_root(tmp_path / "again")


@pytest.mark.notebooks
def test_two_machines_notebook_on_two_h200_collections(tmp_path):
    again = _repeat_root(tmp_path)
    nb11 = NOTEBOOKS[0].parent / "12_two_machines.ipynb"
    path = _with_parameters(nb11, tmp_path / "nb", DATA_B=str(again))
    nb, _ = _executes_and_renders(path, "h200")
    out = _outputs_text(nb)
    assert "No sweep point was measured on both" not in out  # the two share points
    assert "only a" in out  # and the points only the first holds are listed


@pytest.mark.notebooks
def test_your_model_notebook_on_a_one_model_root(tmp_path):
    from tests.fixtures.one_model import one_model_root

    root = one_model_root(tmp_path / "mine")
    nb, _ = _executes_and_renders(NOTEBOOKS[0].parent / "11_your_model.ipynb", root)
    out = _outputs_text(nb)
    assert "my_ncu" in out and "my_sweep" in out  # the tables found by role
    assert "holds no" not in out  # every section drew from the root


@pytest.mark.notebooks
def test_your_model_notebook_on_the_shipped_example():
    # the same execution as test_notebook_executes_on_a_your_model_root's (one cache key)
    nb, _ = _executes_and_renders(NOTEBOOKS[0].parent / "11_your_model.ipynb", EXAMPLE)
    out = _outputs_text(nb)
    assert "trace_fp16_b16" in out and "ncu_occupancy_b16" in out  # every role found
    assert not any(f"holds no {role} table" in out for role in ("sweep", "trace", "ncu"))


# --- a root's notebook parameters are data -----------------------------------------------------


def _render_main(probe_notebook, root, out):
    from yolo_sm.cli.main import main

    return main(
        ["render", "--notebooks", str(probe_notebook), "--data", str(root), "--out", str(out)]
    )


BAD_PARAMETERS = {
    # a key that is a statement: pasted as `key = value` it ran in the kernel
    "code in a key": {"99": {"import os; os.system('touch MARK'); X": 1}},
    "another root": {"99": {"DATA": "cpu"}},  # rendered another root's data under this name
    "collect here": {"99": {"LIVE": True}},
    "unknown name": {"99": {"IMGSZ": 320}},
    "wrong type": {"99": {"SWEEP": 3}},
    "a list for a text": {"99": {"SWEEP": ["sweep_1280"]}},
    "not a mapping": {"99_probe": ["SWEEP"]},
}


@pytest.mark.parametrize("table", BAD_PARAMETERS.values(), ids=list(BAD_PARAMETERS))
def test_root_parameters_outside_the_notebooks_own_are_one_sentence_before_any_kernel(
    table, probe_notebook, tmp_path, make_root, capsys, monkeypatch
):
    import yaml

    from yolo_sm.report import render

    started = []
    monkeypatch.setattr(render, "run", lambda *a, **k: started.append(a))
    root = make_root("hostile", ["sweep_1280"])
    (root / "notebook_parameters.yaml").write_text(yaml.safe_dump(table))
    monkeypatch.chdir(tmp_path)
    assert _render_main(probe_notebook, root, tmp_path / "site") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "notebook_parameters.yaml" in err, err
    assert not started and not (tmp_path / "site").exists() and not (tmp_path / "MARK").exists()


def test_a_crafted_parameter_key_never_reaches_a_kernel(probe_notebook, tmp_path, make_root):
    """End to end, kernels and all: the key that executed on the old renderer does not."""
    import yaml

    root = make_root("hostile", ["sweep_1280"])
    mark = tmp_path / "MARK"
    key = f"import pathlib; pathlib.Path({str(mark)!r}).touch(); X"
    (root / "notebook_parameters.yaml").write_text(yaml.safe_dump({"99": {key: 1}}))
    assert _render_main(probe_notebook, root, tmp_path / "site") == 2
    assert not mark.exists() and not (tmp_path / "site").exists()


def test_declared_parameters_and_their_types():
    from yolo_sm.report.render import _fits, declared_parameters

    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                'DATA = "h200"\nA, B = 1.25, 512\nS = ["x"]\nT = S\nN = None\nF = f(1)',
                metadata={"tags": ["parameters"]},
            )
        ]
    )
    d = declared_parameters(nb)
    assert d == {"DATA": "h200", "A": 1.25, "B": 512, "S": ["x"], "T": ["x"], "N": None}
    assert _fits(2, 1.25) and not _fits(2.5, 512) and not _fits(True, 512)
    assert not _fits(float("nan"), 1.25) and not _fits(float("inf"), 1.25)
    assert _fits(["a", "b"], ["x"]) and not _fits(["a", 1], ["x"]) and not _fits("a", ["x"])
    assert _fits("cpu", None) and _fits(None, None) and not _fits(1, None)
    assert _fits([0.5, 2], [0.25, 1.0]) and not _fits({"a": 1}, "x")


@pytest.mark.parametrize("data", ROOTS + ("h200_repeat",))
def test_shipped_roots_parameters_are_accepted(data):
    from yolo_sm.report.render import prepare

    for path in NOTEBOOKS:
        prepare(path, data)  # raises on a name or value a notebook does not take


# --- no silent stall: explorers under nbclient ---------------------------------------------------

EXPLORERS = "from yolo_sm.report import widgets\n" + "\n".join(
    f"display(widgets.occupancy_explorer('9.0', {t}, 32, 0))" for t in (64, 128, 256, 512)
)


def test_notebooks_with_explorers_never_wait_out_a_cell_timeout(tmp_path, monkeypatch):
    """Each explorer fills its Output area while its cell runs. nbclient's stand-in echoed that
    output to the kernel as a comm message on the shell socket, through a blocking shadow of the
    socket that the client's wait for the cell's reply polls: at random (about one explorer in
    twenty-five) the send swallowed the reply's wake-up and the wait slept to the cell's timeout,
    then read the reply as if on time. So: no comm message goes to the kernel (the cause, every
    time), and three notebooks of four explorers each stay within a 20 s bound (2 to 9 s each on
    2 busy cores; a stall runs to the bound and is a UserError)."""
    from jupyter_client.channels import ZMQSocketChannel

    from yolo_sm.report.render import run

    sent = []
    original = ZMQSocketChannel.send
    monkeypatch.setattr(
        ZMQSocketChannel,
        "send",
        lambda self, msg: sent.append(msg["header"]["msg_type"]) or original(self, msg),
    )
    for _ in range(3):
        nb = nbformat.v4.new_notebook(
            cells=[
                nbformat.v4.new_markdown_cell("# 99 · explorers"),
                nbformat.v4.new_code_cell(EXPLORERS),
            ]
        )
        run(nb, tmp_path, timeout=20, limit=20)
        assert sum("widget-view" in str(o) for o in nb.cells[1].outputs) == 4
    assert "execute_request" in sent and "comm_msg" not in sent, set(sent)


#: roots of one model of a user's own: the shipped example (a checkpoint on a GPU) and
#: ResNet-18 as torchvision.models:resnet18 collected on a CPU at 3x224x224
EXAMPLE = "examples/yolov8n_calibrated"
RESNET18 = str(Path(__file__).resolve().parent / "fixtures" / "resnet18_cpu")
#: which notebooks each such root exercises on a path of its own. 11 and 12 find their tables by
#: role (sweep, trace, ncu: the example holds an ncu table, ResNet-18 none): both roots. The
#: notebooks that read ``sweep_fp16_nhwc`` or ``model_layers`` by name (01-03, 05-09, 17) draw
#: from one model that is not a YOLO width: ResNet-18 (the example's yolov8n is one more width of
#: what the H200 and CPU roots hold). The others (00, 04, 10, 13-16) read no table these roots
#: hold (10's probes are found by role, and neither root has one), so they take the path of
#: ``test_notebook_executes_on_a_root_of_one_step``.
YOUR_MODEL_CASES = [
    (p, root)
    for p in NOTEBOOKS
    for root in (EXAMPLE, RESNET18)
    if p.name[:2] in ("11", "12")
    or (root == RESNET18 and p.name[:2] in ("01", "02", "03", "05", "06", "07", "08", "09", "17"))
]


@pytest.mark.notebooks
@pytest.mark.parametrize(
    ("path", "data"),
    YOUR_MODEL_CASES,
    ids=[f"{p.name}-{'example' if r == EXAMPLE else 'resnet18_cpu'}" for p, r in YOUR_MODEL_CASES],
)
def test_notebook_executes_on_a_your_model_root(path, data):
    """The notebooks that draw from a root of one model of a user's own render from it; what a
    page lacks it says in a line instead of failing."""
    _executes_and_renders(path, data, figures=False)
