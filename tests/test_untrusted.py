"""Untrusted input stays data: a dataset root full of hostile strings reaches the pages only
as text (no live element once the Markdown and HTML are parsed); writers never follow a link
planted at their target or at a predictable temporary name; work on generated inputs grows
linearly (time measured as a ratio to a small input, never against a wall clock)."""

from __future__ import annotations

import json
import time
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from yolo_sm.contract.datasets import open_root
from yolo_sm.contract.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = (
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(2)">',
    "<svg onload=alert(3)>",
    '<a href="javascript:alert(4)">x</a>',
    "`</code><iframe src=//evil>`",
    "**[x](javascript:alert(5))**",
)
LIVE_TAGS = {"script", "img", "svg", "iframe", "object", "embed", "link", "form", "a", "base"}


class _Elements(HTMLParser):
    def __init__(self):
        super().__init__()
        self.live = []

    def handle_starttag(self, tag, attrs):
        bad_attr = [
            k
            for k, v in attrs
            if k.startswith("on") or (v or "").strip().lower().startswith("javascript:")
        ]
        if tag in LIVE_TAGS or bad_attr:
            self.live.append((tag, attrs))


def live_elements(html: str) -> list:
    p = _Elements()
    p.feed(html)
    p.close()
    return p.live


def markdown_html(text: str) -> str:
    """Markdown as the notebook renderer (nbconvert's mistune) turns it into HTML."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    return markdown2html_mistune(text)


@pytest.fixture
def hostile_root(tmp_path):
    """A root whose folder name, GPU name, CPU model and every other provenance field is a
    hostile string."""
    folder = tmp_path / "<svg onload=alert(9)>"
    folder.mkdir()
    fields = ("gpu_name", "cpu_model", "driver", "cuda", "torch", "cudnn", "compute_capability")
    prov = {f: HOSTILE[i % len(HOSTILE)] for i, f in enumerate(fields)}
    prov.update(sm_count=HOSTILE[1], date_utc_last=HOSTILE[2])
    entries = {
        f"sweep_{i}": {"file": f"s{i}.parquet", "kind": "sweep", "provenance": prov}
        for i in range(2)
    }
    (folder / "manifest.json").write_text(json.dumps({"datasets": entries}))
    return open_root(folder)


def test_the_hostile_strings_are_live_when_not_escaped():
    """The check below can fail: each hostile string is a live element as raw HTML."""
    for s in HOSTILE[:4]:
        assert live_elements(markdown_html(f"Measured on **{s}**."))


def test_markdown_lines_from_a_root_hold_no_live_element(hostile_root):
    from yolo_sm.report import plots, sections

    lines = [plots.about(hostile_root), sections.missing_note(hostile_root, list(HOSTILE))]
    for line in lines:
        assert live_elements(markdown_html(line)) == [], line
    # a section's missing-dataset sentence is printed: plain text, never Markdown or HTML
    line = plots.lacks(hostile_root, HOSTILE[1])
    assert isinstance(line, str) and not hasattr(line, "_repr_markdown_")


@pytest.mark.parametrize("stem", ["03_batch_sweep", "05_sm_timeline"])
def test_notebooks_03_and_05_name_the_machine_without_live_elements(hostile_root, stem):
    """The cell of notebooks 03 and 05 that names the root's machine, run on a hostile root."""
    from IPython.display import Markdown

    from yolo_sm.report import plots

    nb = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text())
    cells = [
        "".join(c["source"])
        for c in nb["cells"]
        if c["cell_type"] == "code" and "".join(c["source"]).startswith("Markdown(")
    ]
    machine = [c for c in cells if "data" in c and "rules.markdown" not in c]
    assert machine, "the notebook names its machine in a Markdown cell"
    for src in machine:
        shown = eval(src, {"Markdown": Markdown, "plots": plots, "data": hostile_root})  # noqa: S307
        assert live_elements(markdown_html(shown.data)) == [], shown.data


def test_tables_escape_cells_labels_headers_and_caption():
    from yolo_sm.report import tables

    df = pd.DataFrame(
        {"layer": list(HOSTILE), "median_ms": range(len(HOSTILE)), HOSTILE[2]: list(HOSTILE)},
        index=pd.Index(list(reversed(HOSTILE)), name=HOSTILE[0]),
    )
    html = tables.show(df, caption=HOSTILE[1]).to_html()
    assert live_elements(html) == []
    assert "&lt;script&gt;" in html  # shown as text, not dropped
    assert live_elements(tables.show_dict({HOSTILE[0]: HOSTILE[1]}).to_html()) == []


def test_the_site_index_holds_no_live_element(hostile_root):
    from yolo_sm.report import site_index

    page = site_index.index_html(hostile_root, [], pd.DataFrame(), {}, {})
    body = page.split("</head>", 1)[1]
    assert live_elements(body) == []
    assert "&lt;svg onload=alert(9)&gt;" in body  # the root's name, shown as text


# --- writers never follow a planted link ------------------------------------------------------


def _writers():
    from yolo_sm.contract.store import copy_atomic, write_atomic, write_text_atomic
    from yolo_sm.core.distributed.units import OWNER, write_owner
    from yolo_sm.core.engines.tensorrt import _write_atomic

    def source(d):
        (d / "src.bin").write_bytes(b"new")
        return d / "src.bin"

    return {
        "store.write_atomic": ("t.parquet", lambda p: write_atomic(pd.DataFrame({"a": [1]}), p)),
        "store.write_text_atomic": ("t.txt", lambda p: write_text_atomic(p, "new")),
        "store.copy_atomic": ("t.bin", lambda p: copy_atomic(source(p.parent), p)),
        "tensorrt plan": ("e.plan", lambda p: _write_atomic(p, b"new")),
        "shard owner": (OWNER, lambda p: write_owner(p.parent, {"gpu": 0})),
    }


@pytest.mark.parametrize("name", list(_writers()))
def test_writers_replace_a_planted_link_instead_of_writing_through_it(tmp_path, name):
    import os

    target_name, write = _writers()[name]
    folder = tmp_path / "out"
    folder.mkdir()
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    target = folder / target_name
    target.symlink_to(victim)
    pid = os.getpid()
    for old in (  # the predictable temporary names writers once used
        f"{target_name}.partial",
        f".{target_name}.tmp{pid}",
        f"{target_name}.{pid}.partial",
        f".{target_name}.{pid}.partial",
    ):
        (folder / old).symlink_to(victim)
    write(target)
    assert victim.read_bytes() == b"precious"
    assert target.is_file() and not target.is_symlink()


# --- bounded work: linear in the input -------------------------------------------------------


def _seconds(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _ratio(small, large, repeat: int = 3) -> float:
    """Best time of ``large`` over best time of ``small`` (each the fastest of ``repeat``
    runs, after one run of each that warms imports and caches)."""
    small(), large()
    return _seconds(large, repeat) / max(_seconds(small, repeat), 1e-4)


def _plan(tmp_path, n: int):
    from yolo_sm.contract.plans import load_plan

    steps = "".join(
        f"  - name: s{i}\n    kind: sweep\n    out: s{i}.parquet\n"
        "    params: {widths: [0.0625], precisions: [fp32], layouts: [nchw], batches: [1], "
        "imgsz: [64]}\n"
        for i in range(n)
    )
    path = tmp_path / f"plan{n}.yaml"
    path.write_text(f"name: p\ndevice: cpu\nsteps:\n{steps}")
    return load_plan(path)


def test_collect_status_is_linear_in_plan_steps(tmp_path):
    """10x the steps: ~10x the time (the quadratic status read every sweep table per step:
    ~100x)."""
    from yolo_sm.core.plans import status

    small, large = _plan(tmp_path, 40), _plan(tmp_path, 400)
    out = tmp_path / "root"
    out.mkdir()
    ratio = _ratio(lambda: status(small, out), lambda: status(large, out))
    assert ratio < 35, ratio


def test_a_roots_datasets_are_read_linearly(tmp_path):
    """Finding datasets by role over a root of 10x the datasets: ~10x the time (the manifest
    was parsed again for every dataset: ~100x)."""

    def root(n):
        folder = tmp_path / f"r{n}"
        folder.mkdir()
        entries = {
            f"d{i}": {"file": f"d{i}.parquet", "kind": "sweep", "provenance": {"gpu_name": "g"}}
            for i in range(n)
        }
        (folder / "manifest.json").write_text(json.dumps({"datasets": entries}))
        return open_root(folder)

    small, large = root(300), root(3000)

    def scan(r):
        r.find_all("sweep")
        r.machine()
        for n in r.names():
            r.info(n)

    assert _ratio(lambda: scan(small), lambda: scan(large)) < 35


def test_the_kineto_loader_is_linear_in_kernels(tmp_path):
    """16x the forwards (and kernels): ~16x the time (the loader scanned every range before a
    kernel for each kernel: ~256x)."""
    import gzip

    from yolo_sm.core.profiling.kineto import load_kernels

    def trace(iters, layers=100):
        ev, t, corr = [], 0.0, 0
        for _ in range(iters):
            t0 = t
            for layer in range(layers):
                start = t
                corr += 1
                ev.append(
                    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                     "tid": 1, "ts": t + 0.5, "dur": 1, "args": {"correlation": corr}}
                )  # fmt: skip
                ev.append(
                    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7,
                     "ts": t + 10, "dur": 3, "args": {"correlation": corr, "grid": [4, 1, 1],
                     "block": [128, 1, 1], "registers per thread": 32, "shared memory": 0}}
                )  # fmt: skip
                t += 2
                ev.append(
                    {"ph": "X", "cat": "user_annotation", "name": f"model.{layer} Conv [head]",
                     "pid": 1, "tid": 1, "ts": start, "dur": t - start}
                )  # fmt: skip
                t += 1
            ev.append(
                {"ph": "X", "cat": "user_annotation", "name": "profiled_forward", "pid": 1,
                 "tid": 1, "ts": t0, "dur": t - t0}
            )  # fmt: skip
        path = tmp_path / f"t{iters}.json.gz"
        with gzip.open(path, "wt") as fh:
            json.dump({"traceEvents": ev}, fh)
        return path

    small, large = trace(4), trace(64)
    df = load_kernels(large)
    assert len(df) == 64 * 100 and df.iteration.max() == 63 and df.layer.iloc[-1] == "model.99"
    ratio = _ratio(lambda: load_kernels(small), lambda: load_kernels(large), repeat=2)
    assert ratio < 48, ratio


def test_an_alias_bomb_is_refused_as_fast_as_a_small_config(tmp_path):
    """A 443-byte YAML whose aliases stand for 9**9 values: one UserError, in about the time
    a plain config takes to read (it once grew to gigabytes)."""
    from yolo_sm.contract.plans import load_yaml
    from yolo_sm.contract.values import MAX_TEXT_BYTES

    items = ['&a0 ["lolol","lolol","lolol","lolol","lolol","lolol","lolol","lolol","lolol"]']
    items += [f"&a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(f"check: [{', '.join(items)}]\n")
    plain = tmp_path / "plain.yaml"
    plain.write_text("widths: [" + ", ".join(["0.25"] * 200) + "]\n")
    assert bomb.stat().st_size < 600 < MAX_TEXT_BYTES

    def refused():
        with pytest.raises(UserError, match="aliases"):
            load_yaml(str(bomb))

    assert _ratio(lambda: load_yaml(str(plain)), refused) < 20


def test_an_oversized_trace_is_refused_before_it_is_inflated(tmp_path, monkeypatch):
    import gzip

    from yolo_sm.core.profiling import kineto

    monkeypatch.setattr(kineto, "MAX_TRACE_BYTES", 1 << 16)
    path = tmp_path / "big.json.gz"
    with gzip.open(path, "wb") as fh:
        fh.write(b'{"traceEvents": [' + b" " * (1 << 20) + b"]}")
    assert path.stat().st_size < 1 << 14
    with pytest.raises(UserError, match="MiB"):
        kineto.read_trace(path)


def test_a_checkpoint_that_unpacks_past_the_cap_is_refused_before_torch_reads_it(
    tmp_path, monkeypatch
):
    import zipfile

    from yolo_sm.core.models import checkpoint

    path = tmp_path / "bomb.pt"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("archive/data.pkl", b"\0" * (4 << 20))
    assert path.stat().st_size < 64 << 10
    monkeypatch.setattr(checkpoint, "MAX_CHECKPOINT_BYTES", 1 << 20)
    monkeypatch.setattr(checkpoint, "prepare_ultralytics", lambda: pytest.fail("read on"))
    with pytest.raises(UserError, match="unpacks to"):
        checkpoint.read_checkpoint(path)
