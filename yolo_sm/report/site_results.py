"""Which rules each page of the site leads with, and its key-results box. A rule's ``group``
is its home page's stem or the start of its topic; :data:`HEADLINES` orders each page's rules."""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from yolo_sm import topics
from yolo_sm.contract.datasets import DataRoot
from yolo_sm.report.rules import NOT_TESTED, frame
from yolo_sm.report.site import Page, verdict_class

#: group -> the rule ids that answer its notebook's question (first: the index's line)
HEADLINES: dict[str, tuple[str, ...]] = topics.headlines()
#: rules a group without headlines leads with
FALLBACK = 3


def home_pages(verdicts: pd.DataFrame, pages: list[Page]) -> dict:
    """group -> stem of its home page among ``pages``: its stem, else the first whose topic
    starts with it."""
    out = {}
    for group in dict.fromkeys(verdicts.group):
        by_topic = (p.topic == group or p.topic.startswith(f"{group}_") for p in pages)
        stems = [p.stem for p in pages if p.stem == group]
        stems += [p.stem for p, hit in zip(pages, by_topic, strict=True) if hit]
        if stems:
            out[group] = stems[0]
    return out


def page_rows(verdicts: pd.DataFrame, page: Page, homes: dict) -> pd.DataFrame:
    """The rows ``page`` leads with: its groups' :data:`HEADLINES`, else their first rules."""
    parts = []
    for group in _groups_of(page, homes):
        rows = verdicts[verdicts.group == group]
        wanted = [i for i in HEADLINES.get(group, ()) if i in set(rows.id)]
        picked = rows.set_index("id").loc[wanted].reset_index() if wanted else rows.head(FALLBACK)
        parts.append(picked)
    if not parts:
        return verdicts.iloc[0:0]
    return pd.concat(parts, ignore_index=True)[list(verdicts.columns)]


def _groups_of(page: Page, homes: dict) -> list[str]:
    return sorted((g for g, s in homes.items() if s == page.stem), key=lambda g: g != page.stem)


def page_tally(verdicts: pd.DataFrame, page: Page, homes: dict) -> dict:
    """verdict -> how many of the page's groups' rules reach it, most frequent first."""
    groups = _groups_of(page, homes)
    return verdicts[verdicts.group.isin(groups)].verdict.value_counts().to_dict()


def verdict_badge(verdict: str) -> str:
    cls = verdict_class(verdict)
    return f'<span class="verdict {cls}">{html.escape(verdict)}</span>'


def rows_table(
    rows: pd.DataFrame,
    first: tuple[str, ...] = (),
    last: tuple[str, ...] = (),
    answer: str = "result",
    table_id: str = "",
) -> str:
    """Verdict rows as an HTML table; ``first`` / ``last`` head extra columns whose cells (HTML)
    are ``rows.attrs['lead']`` / ``['tail']``."""
    shown = frame(rows)
    lead, tail = rows.attrs.get("lead", []), rows.attrs.get("tail", [])
    names = (*first, answer, "measured", "holds at", "verdict", *last)
    head = "".join(f"<th>{html.escape(h)}</th>" for h in names)
    body = []
    for i, (_, r) in enumerate(shown.iterrows()):
        before = "".join(f"<td>{c}</td>" for c in (lead[i] if lead else ()))
        after = "".join(f"<td>{c}</td>" for c in (tail[i] if tail else ()))
        body.append(
            f'<tr>{before}<td class="statement">{html.escape(r.statement)}</td>'
            f'<td class="num">{html.escape(r.measured)}</td>'
            f'<td class="num">{html.escape(r.threshold)}</td>'
            f"<td>{verdict_badge(r.verdict)}</td>{after}</tr>"
        )
    where = f' id="{html.escape(table_id, quote=True)}"' if table_id else ""
    return (
        f'<table class="yolo-table"{where}><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def results_box(
    verdicts: pd.DataFrame, page: Page, homes: dict, machine: str, findings: str | None = None
) -> str:
    """The key-results box of ``page``; ``findings``: the id of its findings heading."""
    rows = page_rows(verdicts, page, homes)
    if rows.empty:
        return ""
    tally = page_tally(verdicts, page, homes)
    counts = ", ".join(f"{n} {v}" for v, n in tally.items())  # most frequent first
    where = f' (<a href="#{html.escape(findings, quote=True)}">Findings</a>)' if findings else ""
    lacks = lacking_line(verdicts, rows)
    return (
        '<section class="yolo-results" aria-label="key results">'
        f"<h2>Key results on {html.escape(machine)}</h2>{rows_table(rows)}"
        + (f'<p class="lacks">{html.escape(lacks)}</p>' if lacks else "")
        + f"<p>All {sum(tally.values())} rules of this page{where}: {html.escape(counts)}. "
        "Each verdict is computed from the dataset root when the page is rendered.</p></section>"
    )


def lacking_line(verdicts: pd.DataFrame, rows: pd.DataFrame) -> str:
    """How many ``rows`` read "not tested" for a dataset the root lacks, and what adds it
    (``""`` when none or ``verdicts.attrs`` names no root)."""
    if not verdicts.attrs.get("root_path"):
        return ""
    root = DataRoot(Path(verdicts.attrs["root_path"]), str(verdicts.attrs.get("root_name", "")))
    prefix = f"{root.name}/"
    lacking, count = [], 0
    for names in rows.datasets[rows.verdict == NOT_TESTED]:
        names = [n.removeprefix(prefix) for n in str(names or "").split(", ") if n]
        absent = [n for n in names if "/" not in n and not root.has(n)]
        lacking += absent
        count += bool(absent)
    adds = root.adds(lacking)
    if not adds:
        return ""
    return f"{count} of these read{'s' if count == 1 else ''} data this root lacks: {adds}."
