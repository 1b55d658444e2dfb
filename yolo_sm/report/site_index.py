"""The site's index page: the root's machine, one key result per notebook, reading order, claim
sources, how to reproduce, notes."""

from __future__ import annotations

import html
import re

import pandas as pd

from yolo_sm.contract.datasets import MACHINE_FIELDS, DataRoot
from yolo_sm.report.site import SITE_CSS, Page
from yolo_sm.report.site_results import page_rows, page_tally, rows_table

#: how the index names each provenance field (yolo_sm.contract.datasets.MACHINE_FIELDS)
FIELD_LABELS = {
    "gpu_name": "GPU", "sm_count": "SM count", "compute_capability": "compute capability",
    "driver": "NVIDIA driver", "cuda": "CUDA", "torch": "PyTorch", "cudnn": "cuDNN",
    "ultralytics": "ultralytics", "python": "Python", "cpu_model": "host CPU",
    "gpu_uuid": "GPU UUID (the datasets that record one)",
}  # fmt: skip

ABOUT = (
    "yolo_sm measures how YOLO object detectors use a GPU's streaming multiprocessors (SMs): "
    "which limits set each kernel's occupancy, how much of the GPU a forward fills at each "
    "width, batch, precision and memory layout, where the time goes (tensor-core convolutions, "
    "data movement, launch gaps), and what faster engines (CUDA graphs, torch.compile, 8-bit) "
    "and an end-to-end pipeline buy. Each notebook asks one question and answers it from the "
    "tables of one dataset root, measured once on a GPU and shipped with the code; every "
    "verdict below is a rule (a measured fact against a threshold) decided when this site was "
    "built, so the same pages rendered from another machine's root state that machine's answers."
)

NOTES = (
    "The models have random weights (nothing is downloaded): speed, occupancy and memory do not "
    "depend on what the weights are, but detections do, so the post-processing load (boxes "
    "above the score threshold, boxes after NMS) is a worst case rather than a trained model's.",
    "Widgets (the explorers) are interactive in JupyterLab only; a rendered page shows a "
    "placeholder where one is, beside figures of the same data.",
    "A verdict reads <i>not tested</i> where the root lacks the dataset its rule reads; the "
    "page's section says which collection step makes it.",
    "The site is self-contained: every page loads plotly.js and its style sheets from this "
    "folder, so it opens offline, from a folder or from a zip.",
)

_ARTICLE = re.compile(r"^\s*\d+\.\s+\*([^*]+)\*\s*(.*?)\s*;?\s*$")


def cudnn_text(value: str) -> str:
    """cuDNN's version (``91900``) with its dotted form."""
    try:
        n = int(value)
    except (TypeError, ValueError):
        return value
    major, rest = (n // 10000, n % 10000) if n >= 10000 else (n // 1000, n % 1000)
    return f"{major}.{rest // 100}.{rest % 100} ({n})"


def provenance_rows(root: DataRoot) -> list[tuple[str, str]]:
    """(label, value) per provenance field, the measurement dates and the dataset count."""
    m = root.machine()
    rows = []
    for f in MACHINE_FIELDS:
        v = m.get(f, "")
        rows.append((FIELD_LABELS.get(f, f), cudnn_text(v) if f == "cudnn" and v else v or "—"))
    for which in ("first", "last"):
        stamp = m.get(f"date_utc_{which}", "")
        rows.append((f"{which} measurement (UTC)", stamp[:16].replace("T", " ") or "—"))
    rows.append(("datasets in the root", str(len(root.names()))))
    return rows


def provenance_table(root: DataRoot) -> str:
    body = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
        for k, v in provenance_rows(root)
    )
    return (
        f'<table class="yolo-table yolo-provenance" id="provenance"><tbody>{body}</tbody></table>'
    )


def articles(first_markdown: str) -> list[tuple[str, str]]:
    """(title, what it covers) of each ``1. *Title* ...`` line of a Markdown cell."""
    found = (_ARTICLE.match(line) for line in first_markdown.splitlines())
    return [(m.group(1).strip(), m.group(2).strip()) for m in found if m]


def key_results(verdicts: pd.DataFrame, pages: list[Page], homes: dict) -> str:
    """One line per page: its question, first headline verdict and the tally of its rules."""
    picked, lead, tail = [], [], []
    for p in pages:
        rows = page_rows(verdicts, p, homes)
        if rows.empty:
            continue
        tally = page_tally(verdicts, p, homes)
        counts = ", ".join(f"{n} {v}" for v, n in tally.items())  # most frequent first
        picked.append(rows.iloc[:1])
        question = p.question[:1].upper() + p.question[1:] if p.question else p.heading
        link = f'<a class="page" href="{html.escape(p.file)}">{html.escape(p.number)} · '
        lead.append((f"{link}{html.escape(p.heading)}</a>", html.escape(question)))
        tail.append((f'<span class="tally">{html.escape(counts)}</span>',))
    if not picked:
        return "<p>No page of this rendering decides a rule.</p>"
    rows = pd.concat(picked, ignore_index=True)
    rows.attrs["lead"], rows.attrs["tail"] = lead, tail
    return rows_table(rows, ("page", "question"), ("all its rules",), "answer", "key-results")


def _role(p: Page, homes: dict) -> str:
    if "primer" in p.topic:
        return "start here: the concepts, taught with this root's own kernels"
    if homes.get("claims") == p.stem:
        return "the verdict board: every claim of the articles below, held against the data"
    if homes.get("10_fast_engines") == p.stem:
        return "what to deploy: the engines ranked per batch regime, against the measured roof"
    return ""


def reading_order(pages: list[Page], homes: dict) -> str:
    items = []
    for p in pages:
        role = _role(p, homes)
        items.append(
            f'<li><a href="{html.escape(p.file)}">{html.escape(p.title)}</a>'
            + (f" — <em>{html.escape(role)}</em>" if role else "")
            + "</li>"
        )
    return "<ol>" + "".join(items) + "</ol>"


def sources(pages: list[Page], homes: dict, first_cells: dict) -> str:
    claims = homes.get("claims")
    found = articles(first_cells.get(claims, "")) if claims else []
    if not found:
        return "<p>The claims page is not part of this rendering.</p>"
    page = next(p for p in pages if p.stem == claims)
    items = "".join(
        f"<li><cite>{html.escape(t)}</cite>" + (f" {html.escape(what)}" if what else "") + "</li>"
        for t, what in found
    )
    return (
        f'<p>The rules of thumb that <a href="{html.escape(page.file)}">{html.escape(page.number)}'
        f" · {html.escape(page.heading)}</a> checks come from these articles (their numbers were "
        f'measured on other GPUs):</p><ol id="sources">{items}</ol>'
    )


def reproduce(root: DataRoot) -> str:
    name = html.escape(root.name)
    return (
        "<p>Render this site again (a virtual environment without torch; every notebook "
        "executed from the dataset root):</p>"
        f"<pre><code>make report DATA={name}\n"
        "make report DATA=cpu SITE=site/cpu        # the same pages from another root</code></pre>"
        "<p>Measure your own GPU (a CUDA machine, <code>make setup</code> first; the plans are "
        "resumable), then render its root:</p>"
        "<pre><code>.venv/bin/yolo-sm collect --out results/my_gpu   # every headline, ~10 min\n"
        ".venv/bin/yolo-sm collect --plan data/plans/full.yaml --out results/my_gpu   # hours\n"
        "make report DATA=results/my_gpu SITE=site/my_gpu\n"
        f".venv/bin/yolo-sm claims --data results/my_gpu   # the verdicts alone</code></pre>"
        "<p>Explore the widgets live: <code>.venv/bin/jupyter lab notebooks/</code>.</p>"
    )


def index_html(
    root: DataRoot, pages: list[Page], verdicts: pd.DataFrame, homes: dict, first_cells: dict
) -> str:
    """The index page. ``first_cells``: stem -> the notebook's first Markdown cell."""
    machine = root.device_name()
    gpu = root.machine().get("gpu_name")
    title = (
        f"yolo_sm: how YOLO uses the SMs of {gpu}"
        if gpu
        else f"yolo_sm: how YOLO uses a GPU's SMs (root {root.name}, measured on {machine})"
    )
    notes = "".join(f"<li>{n}</li>" for n in NOTES)
    links = " · ".join(
        f'<a href="{html.escape(p.file)}">{html.escape(p.number)}</a>' for p in pages
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>{html.escape(title)}</title>
<link rel="stylesheet" href="{SITE_CSS}">
</head><body class="yolo-index">
<h1>{html.escape(title)}</h1>
<p>{html.escape(ABOUT)}</p>
<p>Dataset root <code>{html.escape(root.name)}</code>, measured on <b>{html.escape(machine)}</b>.
Pages: {links}.</p>
<h2 id="machine">Machine and software</h2>
<p>What the root's datasets were measured with, from the provenance each dataset carries in
the root's manifest (where several datasets disagree, every value is listed).</p>
{provenance_table(root)}
<h2 id="results">Key results</h2>
<p>One line per notebook: its question, the rule that answers it, the measured number and the
verdict (measured on the machine above, decided when this site was built); the last column
counts the verdicts of all the page's rules, each page leads with more of them.</p>
{key_results(verdicts, pages, homes)}
<h2 id="order">Reading order and audience</h2>
<p>The primer teaches occupancy to a newcomer or a class; the numbered pages then answer one
question each for a performance engineer; a reviewer who wants the published rules of thumb
checked goes to the verdict board.</p>
{reading_order(pages, homes)}
<h2 id="claims-sources">Sources of the claims</h2>
{sources(pages, homes, first_cells)}
<h2 id="reproduce">How to reproduce</h2>
{reproduce(root)}
<h2 id="notes">Notes</h2>
<ul>{notes}</ul>
</body></html>
"""
