"""The run report as one self-contained HTML page (``report.html``): the header lines, the advice, the key metrics,
every plot (PNG inlined as a ``data:`` URI) and the trajectory viewer over ``samples.jsonl`` (its data inlined as
JSON in a ``<script type="application/json">`` tag). CSS and script are inline; nothing is fetched from the network.

The viewer's script inserts every text of the data with ``textContent`` (model output is hostile), and the
embedded JSON escapes ``<``, ``>`` and ``&`` (:func:`embed_json`), so no text can close its script tag. The script
sets ``document.body.dataset.viewer`` to ``ready`` once it shows the first trajectory (``none`` without samples)
and writes uncaught errors into ``<pre id="page-errors">``: a headless browser can read both from the DOM.
"""

from __future__ import annotations

import base64
import html
import json
import re
from typing import Any

import attrs

from .report_assets import CSS, ON_ERROR, VIEWER_JS
from .report_plots import Plot
from .report_samples import Samples

__all__ = ["Page", "embed_json", "render_html"]


@attrs.frozen
class Page:
    """What the page shows. ``header`` and ``advice`` are the lines of ``report.md`` (with ``code`` spans);
    ``rows`` the key metrics (metric, first, last, min, max); ``notes`` the plots not drawn and why."""

    title: str
    header: list[str]
    advice: list[str]
    rows: list[tuple[str, str, str, str, str]]
    plots: list[Plot]
    notes: list[str]
    samples: Samples


def embed_json(data: Any) -> str:
    """``data`` as JSON that is safe inside ``<script type="application/json">``: ASCII only, no NaN, and ``<``,
    ``>`` and ``&`` (which only occur inside JSON strings) written ``\\u003c``, ``\\u003e`` and ``\\u0026``."""
    text = json.dumps(data, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _inline(text: str) -> str:
    """Escaped text with Markdown's ``code`` spans as ``<code>``."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text, quote=False))


def _items(lines: list[str]) -> str:
    return "".join(f"<li>{_inline(line)}</li>" for line in lines)


def _metrics_table(rows: list[tuple[str, str, str, str, str]]) -> str:
    if not rows:
        return '<p class="note">No key metric in this run.</p>'
    head = "".join(f"<th>{h}</th>" for h in ("metric", "first", "last", "min", "max"))
    body = "".join("<tr>" + f"<td><code>{html.escape(row[0])}</code></td>"
                   + "".join(f"<td>{html.escape(cell)}</td>" for cell in row[1:]) + "</tr>" for row in rows)
    return f'<table class="metrics"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _plots(plots: list[Plot], notes: list[str]) -> str:
    figures = []
    for plot in plots:
        data = base64.b64encode(plot.png).decode("ascii")
        spec = plot.spec
        figures.append(f'<figure class="plot{" wide" if spec.wide else ""}" id="plot-{spec.name}">'
                       f"<h3>{html.escape(spec.title)}</h3>"
                       f'<img src="data:image/png;base64,{data}" alt="{html.escape(spec.title)}">'
                       f"<figcaption>{html.escape(spec.caption)}</figcaption></figure>")
    listed = f'<ul class="note">{_items(notes)}</ul>' if notes else ""
    return listed + (f'<div class="plots">{"".join(figures)}</div>' if figures else "")


_NO_SAMPLES = (
    "<p>This run has no trajectory sample (<code>samples.jsonl</code>): it predates the sample, or sampling was "
    "off. Turn it on with <code>run.trajectory_samples=N</code> (in the config or as an override of "
    "<code>ragen train</code>): each step then keeps its N best, N worst and N random trajectories (default 2; 0 "
    "turns it off), and this page shows them here.</p>")

_VIEWER = """
<div class="viewer">
  <div class="controls">
    <label>Step <button type="button" id="v-prev" title="previous step">&#9664;</button><select id="v-step"></select>
      <button type="button" id="v-next" title="next step">&#9654;</button></label>
    <label>Pick <select id="v-pick"><option value="">all</option><option value="best">best</option>
      <option value="worst">worst</option><option value="random">random</option></select></label>
    <label>Env <select id="v-env"><option value="">all</option></select></label>
    <span id="v-count" class="note"></span>
  </div>
  <div class="viewer-body">
    <div class="list"><table id="v-list"><thead><tr><th>pick</th><th>env</th><th>seed</th><th>success</th>
      <th>reward</th><th>turns</th></tr></thead><tbody></tbody></table></div>
    <div id="v-detail" class="detail"></div>
  </div>
</div>"""


def _trajectories(samples: Samples) -> str:
    if not samples.steps:
        unreadable = (f'<p class="note">samples.jsonl holds no readable record ({samples.skipped} line(s) '
                      "skipped).</p>" if samples.present else "")
        return unreadable + _NO_SAMPLES
    notes = samples.notes()
    listed = f'<ul class="note">{_items(notes)}</ul>' if notes else ""
    intro = (f'<p class="note">The trajectories the trainer kept ({samples.recorded} sampled steps in '
             "<code>samples.jsonl</code>; <code>run.trajectory_samples</code> best, worst and random ones per "
             "step). Choose a step and a trajectory; each turn shows what the agent saw and wrote.</p>")
    data = f'<script type="application/json" id="samples-data">{embed_json(samples.embedded())}</script>'
    return intro + listed + _VIEWER + data


def render_html(page: Page) -> str:
    """The whole page."""
    title = html.escape(page.title)
    sections = [
        f'<section class="card" id="summary"><ul class="facts">{_items(page.header)}</ul></section>',
        f'<section class="card" id="advice"><h2>Advice</h2><ul>{_items(page.advice)}</ul></section>',
        f'<section class="card" id="metrics"><h2>Key metrics</h2>{_metrics_table(page.rows)}</section>',
        f'<section class="card" id="plots"><h2>Plots</h2>{_plots(page.plots, page.notes)}</section>',
        f'<section class="card" id="trajectories"><h2>Trajectories</h2>{_trajectories(page.samples)}</section>',
    ]
    nav = "".join(f'<a href="#{anchor}">{name}</a>' for anchor, name in (
        ("advice", "Advice"), ("metrics", "Key metrics"), ("plots", "Plots"), ("trajectories", "Trajectories")))
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{title}</title>'
            f"<style>{CSS}</style><script>{ON_ERROR}</script></head>\n"
            f'<body><pre id="page-errors" hidden></pre><header class="top"><h1>{title}</h1><nav>{nav}</nav></header>'
            f'<main>{"".join(sections)}</main>\n<script>{VIEWER_JS}</script></body></html>\n')
