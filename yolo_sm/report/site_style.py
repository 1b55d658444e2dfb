"""The site's own style sheet (``site.css``): the side bar, the key-results box, verdict badges,
folded set-up code, widget placeholders, the index page; and the few rules nbconvert's lab page
sets inline (its ``notebook_css`` block, which the site's template replaces by links)."""

import re

from yolo_sm.report.colors import VERDICT_COLORS


def verdict_class(verdict: str) -> str:
    """A verdict's badge class: ``does not hold`` -> ``verdict-does-not-hold``."""
    return "verdict-" + re.sub(r"[^a-z]+", "-", verdict.lower()).strip("-")


#: one badge class per verdict (:func:`verdict_class`), coloured by colors.VERDICT_COLORS
VERDICT_CSS = "".join(
    f".{verdict_class(v)} {{ background: {bg}; color: {fg}; }}\n"
    for v, (bg, fg) in VERDICT_COLORS.items()
)

SITE_STYLE = (
    """
/* nbconvert's lab page, inline rules */
* { -webkit-print-color-adjust: exact; }
a.anchor-link { display: none; }
.jp-InputArea { overflow: hidden; }
.jp-InputArea-editor { overflow: hidden; }
.cm-editor.cm-s-jupyter .highlight pre {
  padding: var(--jp-code-padding) 4px; margin: 0;
  font-family: inherit; font-size: inherit; line-height: inherit; color: inherit;
}
.jp-OutputArea-output pre { line-height: inherit; font-family: inherit; }
.jp-RenderedText pre { color: var(--jp-content-font-color1); font-size: var(--jp-code-font-size); }
.jp-Collapser { display: none; }
@page { margin: 0.5in; }
@media print {
  .jp-Cell-inputWrapper, .jp-Cell-outputWrapper { display: block; }
  .yolo-side { display: none; }
}

/* the site */
:root { --yolo-side: 17rem; --yolo-accent: #0b5394; }
body.yolo-page main { max-width: 1180px; }
.yolo-side { font-family: var(--jp-ui-font-family, sans-serif); font-size: 13px; line-height: 1.4; }
.yolo-side a { color: var(--yolo-accent); text-decoration: none; }
.yolo-side a:hover { text-decoration: underline; }
.yolo-site-name { font-weight: 700; font-size: 15px; margin: 0 0 .4em; }
.yolo-nav { display: flex; flex-wrap: wrap; gap: .3em 1em; margin: .2em 0 .8em; }
.yolo-nav a { white-space: nowrap; }
.yolo-nav-bottom { border-top: 1px solid #ddd; padding: 1em 0 2em; margin: 2em 0 0 0;
  font-family: var(--jp-ui-font-family, sans-serif); font-size: 14px; }
.yolo-nav-bottom a { color: var(--yolo-accent); }
.yolo-toc h2 { font-size: 13px; text-transform: uppercase; letter-spacing: .05em; color: #555;
  margin: .8em 0 .3em; }
.yolo-toc ul { list-style: none; margin: 0; padding: 0; }
.yolo-toc li { margin: .25em 0; }
.yolo-toc li.toc-h3 { padding-left: 1em; font-size: 12px; }
@media (min-width: 1100px) {
  .yolo-side { position: fixed; top: 0; left: 0; bottom: 0; width: var(--yolo-side);
    overflow-y: auto; padding: 1em 1em 2em 1.2em; box-sizing: border-box;
    border-right: 1px solid #e4e4e4; background: #fafafa; }
  .yolo-side .yolo-nav { flex-direction: column; }
  body.yolo-page main { margin-left: var(--yolo-side); }
}
@media (max-width: 1099px) {
  .yolo-side { padding: .6em 1em; border-bottom: 1px solid #e4e4e4; background: #fafafa; }
  .yolo-toc ul { columns: 2; }
}

.yolo-results { border: 1px solid #c9d6e3; background: #f4f8fb; border-radius: 6px;
  padding: .6em 1em .8em; margin: .8em 0 1.2em; font-family: var(--jp-ui-font-family, sans-serif); }
.yolo-results h2 { font-size: 15px; margin: .2em 0 .5em; }
.yolo-results p { margin: .4em 0 0; font-size: 13px; color: #444; }
table.yolo-table { border-collapse: collapse; font-size: 13px; width: 100%; }
table.yolo-table th, table.yolo-table td { text-align: left; vertical-align: top;
  padding: .3em .6em; border-bottom: 1px solid #dde3ea; }
table.yolo-table th { font-weight: 600; background: #eaf0f6; }
table.yolo-table td.num { white-space: nowrap; font-variant-numeric: tabular-nums; }
.jp-RenderedHTMLCommon .yolo-results table.yolo-table { table-layout: auto; margin: 0; }
.jp-RenderedHTMLCommon .yolo-results table.yolo-table td,
.jp-RenderedHTMLCommon .yolo-results table.yolo-table th { text-align: left; max-width: none;
  vertical-align: top; padding: .3em .6em; border-bottom: 1px solid #dde3ea; }
.yolo-results td.statement { width: 68%; }
#key-results td.statement { width: 36%; }
#key-results a.page { display: inline-block; min-width: 9em; }
#key-results .tally { color: #555; font-size: 12px; }
.verdict { display: inline-block; white-space: nowrap; padding: .05em .5em; border-radius: 3px;
  font-size: 12px; font-weight: 600; color: #fff; }
/* the .verdict-* badge colours follow (VERDICT_CSS) */

details.yolo-setup > summary { cursor: pointer; color: #666; font-size: 11px; line-height: 13px;
  font-family: var(--jp-ui-font-family, sans-serif);
  padding: 0 0 0 var(--jp-cell-prompt-width, 64px); }
/* the page reads as a document: cells close together, each code line one small row */
.yolo-page .jp-Cell { padding-top: 1px; padding-bottom: 1px; }
details.yolo-setup[open] > summary { margin-bottom: .2em; }
details.yolo-more > summary { cursor: pointer; color: #456; font-size: 13px; margin: -.4em 0 .4em; }
details.yolo-fold > summary { cursor: pointer; color: #456; font-size: 13px; margin: .2em 0;
  font-family: var(--jp-ui-font-family, sans-serif); }
.yolo-widget { border: 1px dashed #9aa; background: #f7f9f9; padding: .8em 1em; color: #345;
  font-family: var(--jp-ui-font-family, sans-serif); font-size: 13px; border-radius: 4px; }

/* the index page */
body.yolo-index { font-family: -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
  color: #222; max-width: 74rem; margin: 1.5em auto 3em; padding: 0 1.5em; line-height: 1.5; }
body.yolo-index h1 { font-size: 26px; margin-bottom: .2em; }
body.yolo-index h2 { font-size: 19px; margin-top: 1.6em; border-bottom: 1px solid #e4e4e4;
  padding-bottom: .2em; }
body.yolo-index a { color: var(--yolo-accent); }
body.yolo-index table.yolo-table { font-size: 14px; }
body.yolo-index table.yolo-provenance { width: auto; }
body.yolo-index pre { background: #f5f5f5; padding: .7em 1em; border-radius: 4px;
  overflow-x: auto; }
body.yolo-index code { background: #f2f2f2; padding: 0 .2em; border-radius: 2px; }
body.yolo-index pre code { background: none; padding: 0; }
"""
    + VERDICT_CSS
)
