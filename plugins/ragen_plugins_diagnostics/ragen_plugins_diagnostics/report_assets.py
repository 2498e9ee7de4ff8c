"""The inline style and scripts of ``report.html`` (:mod:`ragen_plugins_diagnostics.report_html`).

The viewer's script builds every element with ``createElement`` and sets every text of the data with
``textContent``: never ``innerHTML``, since the data is model output.
"""

from __future__ import annotations

__all__ = ["CSS", "ON_ERROR", "VIEWER_JS"]

CSS = """
:root { --fg: #1d2330; --muted: #5b6475; --line: #dde1e8; --bg: #f4f5f8; --card: #fff; --accent: #2456a6;
  --good: #1a7f37; --bad: #c62828; --warn: #9a6700; --mono: ui-monospace, "SFMono-Regular", "DejaVu Sans Mono",
  Menlo, Consolas, monospace; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: var(--bg);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
header.top { background: #1d2330; color: #fff; padding: 12px 24px; display: flex; gap: 28px; align-items: baseline;
  flex-wrap: wrap; }
header.top h1 { font-size: 19px; margin: 0; font-weight: 600; }
header.top nav a { color: #c9d4ea; margin-right: 16px; text-decoration: none; }
header.top nav a:hover { color: #fff; text-decoration: underline; }
main { max-width: 1480px; margin: 0 auto; padding: 6px 24px 40px; }
section.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 12px 18px;
  margin: 14px 0; }
h2 { font-size: 17px; margin: 0 0 10px; }
code, pre, .mono { font-family: var(--mono); font-size: 12.5px; }
code { background: #f0f2f6; border-radius: 3px; padding: 0 3px; }
ul.facts, #advice ul { margin: 0; padding-left: 20px; }
#advice li { margin: 3px 0; }
ul.note { padding-left: 20px; }
.note { color: var(--muted); }
table.metrics { border-collapse: collapse; font-size: 13px; }
table.metrics th, table.metrics td { border-bottom: 1px solid var(--line); padding: 3px 12px; text-align: right; }
table.metrics th:first-child, table.metrics td:first-child { text-align: left; padding-left: 0; }
.plots { display: grid; grid-template-columns: repeat(auto-fill, minmax(540px, 1fr)); gap: 14px; }
figure.plot { margin: 0; border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px; }
figure.plot.wide { grid-column: 1 / -1; }
figure.plot h3 { font-size: 14px; margin: 0 0 4px; }
figure.plot img { display: block; max-width: 100%; height: auto; margin: 0 auto; }
figcaption { color: var(--muted); font-size: 12.5px; margin-top: 4px; }
.controls { display: flex; gap: 18px; flex-wrap: wrap; align-items: center; margin: 4px 0 10px; }
.controls label { font-weight: 600; }
.controls select, .controls button { font: inherit; font-weight: normal; margin-left: 4px; }
.viewer-body { display: grid; grid-template-columns: minmax(300px, max-content) minmax(0, 1fr); gap: 14px;
  align-items: start; }
.list { max-height: 85vh; overflow: auto; border: 1px solid var(--line); border-radius: 6px; }
#v-list { width: 100%; border-collapse: collapse; font-size: 13px; }
#v-list th { position: sticky; top: 0; background: #eef1f5; text-align: left; padding: 5px 8px; }
#v-list td { padding: 5px 8px; border-top: 1px solid var(--line); cursor: pointer; }
#v-list tr:hover td { background: #f0f4fb; }
#v-list tr.chosen td { background: #dfe9fb; }
#v-list tr:focus { outline: 2px solid var(--accent); outline-offset: -2px; }
.yes { color: var(--good); font-weight: 600; }
.no { color: var(--bad); }
.detail h3 { margin: 0 0 2px; font-size: 16px; }
.detail .facts { margin: 0 0 8px; color: var(--muted); }
.turn { border: 1px solid var(--line); border-radius: 6px; margin: 10px 0; }
.turn-head { display: flex; gap: 10px; align-items: center; flex-wrap: wrap; background: #eef1f5; padding: 6px 10px;
  border-bottom: 1px solid var(--line); border-radius: 6px 6px 0 0; }
.turn-head .reward { margin-left: auto; font-family: var(--mono); }
.turn-grid { display: grid; grid-template-columns: fit-content(50%) minmax(0, 1fr); gap: 12px;
  padding: 10px 10px 0; }
.field h4 { margin: 0 0 3px; font-size: 11px; text-transform: uppercase; letter-spacing: .05em; color: var(--muted); }
.field pre { margin: 0 0 10px; white-space: pre-wrap; overflow-wrap: anywhere; background: #f8f9fb;
  border: 1px solid var(--line); border-radius: 4px; padding: 6px 8px; max-height: 360px; overflow: auto; }
.field pre.obs { min-width: 140px; font-size: 14px; line-height: 1.25; overflow-wrap: normal; }
.field pre.error { background: #fdeeee; color: var(--bad); }
.field .empty, .chips .empty { color: #98a0ad; font-style: italic; }
.chips { margin-bottom: 10px; }
.chip { display: inline-block; font-family: var(--mono); font-size: 12.5px; background: #e6edfb; color: #1b3f7a;
  border-radius: 4px; padding: 1px 8px; margin: 0 4px 4px 0; }
.badge { font-size: 12px; padding: 0 8px; border-radius: 10px; border: 1px solid; white-space: nowrap; }
.badge.good { color: var(--good); border-color: #9fd3ad; background: #eaf6ed; }
.badge.bad { color: var(--bad); border-color: #f0b4b4; background: #fdeeee; }
.badge.warn { color: var(--warn); border-color: #e8cf8f; background: #fdf6e3; }
.badge.muted { color: var(--muted); border-color: var(--line); background: #fff; }
details { padding: 0 10px 8px; }
summary { cursor: pointer; color: var(--accent); font-size: 12.5px; }
details pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f8f9fb; border: 1px solid var(--line);
  border-radius: 4px; padding: 6px 8px; margin: 4px 0 0; max-height: 360px; overflow: auto; }
#page-errors { margin: 0; padding: 8px 24px; background: #fdeeee; color: var(--bad); white-space: pre-wrap; }
@media (max-width: 980px) { .viewer-body, .turn-grid { grid-template-columns: minmax(0, 1fr); }
  .plots { grid-template-columns: minmax(0, 1fr); } }
"""

ON_ERROR = """
window.onerror = function (message, source, line, column) {
  var box = document.getElementById("page-errors");
  if (box) {
    box.hidden = false;
    box.textContent += "page error: " + String(message) + " (line " + line + ":" + column + ")\\n";
  }
  return false;
};
"""

VIEWER_JS = r"""
(function () {
  "use strict";
  var source = document.getElementById("samples-data");
  if (!source) { document.body.dataset.viewer = "none"; return; }
  var steps = JSON.parse(source.textContent).steps;
  var state = {index: steps.length - 1, pick: "", env: "", chosen: 0};
  function byId(id) { return document.getElementById(id); }
  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }
  function clear(node) { while (node.firstChild) { node.removeChild(node.firstChild); } }
  function num(x) { return typeof x === "number" ? String(Math.round(x * 1000) / 1000) : "\u2013"; }
  function shown(x) { return x === null || x === undefined ? "\u2013" : String(x); }
  function field(title, text, cls) {
    var box = el("div", "field");
    box.appendChild(el("h4", null, title));
    box.appendChild(text ? el("pre", cls || null, text) : el("pre", "empty", "(none)"));
    return box;
  }
  function more(title, text, open) {
    var box = el("details");
    box.open = Boolean(open);
    box.appendChild(el("summary", null, title));
    box.appendChild(el("pre", null, text));
    return box;
  }
  function formatBadge(turn) {
    if (turn.format_ok === false) {
      var penalty = turn.format_penalty ? " (" + num(turn.format_penalty) + ")" : "";
      return el("span", "badge bad", "format penalised" + penalty);
    }
    return el("span", turn.format_ok ? "badge good" : "badge muted", turn.format_ok ? "format ok" : "format ?");
  }
  function renderTurn(turn, k) {
    var card = el("section", "turn");
    var head = el("div", "turn-head");
    head.appendChild(el("strong", null, "Turn " + (k + 1)));
    head.appendChild(formatBadge(turn));
    head.appendChild(turn.truncated ? el("span", "badge warn", "truncated") : el("span", "badge muted", "not truncated"));
    head.appendChild(el("span", "reward", "reward " + num(turn.reward)));
    card.appendChild(head);
    var grid = el("div", "turn-grid");
    grid.appendChild(field("Observation", turn.observation, "obs"));
    var right = el("div");
    right.appendChild(field("Reasoning", turn.reasoning));
    right.appendChild(field("Answer", turn.answer));
    var actions = el("div", "field");
    actions.appendChild(el("h4", null, "Actions"));
    var chips = el("div", "chips");
    turn.actions.forEach(function (a) { chips.appendChild(el("span", "chip", a)); });
    if (!turn.actions.length) { chips.appendChild(el("span", "empty", "(no action)")); }
    actions.appendChild(chips);
    right.appendChild(actions);
    grid.appendChild(right);
    card.appendChild(grid);
    card.appendChild(more("raw response", turn.response, turn.format_ok === false || !turn.answer));
    if (turn.info) { card.appendChild(more("info", turn.info)); }
    return card;
  }
  function renderDetail(record) {
    var box = byId("v-detail");
    clear(box);
    if (!record) { box.appendChild(el("p", "note", "No trajectory of this step matches the filter.")); return; }
    box.appendChild(el("h3", null, "Step " + record.step + " \u00b7 " + record.pick + " \u00b7 " + record.env));
    box.appendChild(el("p", "facts", "seed " + shown(record.seed) + " \u00b7 group " + shown(record.group_id) +
      " \u00b7 episode " + shown(record.episode_id) + " \u00b7 " + (record.success ? "success" : "no success") +
      " \u00b7 reward " + num(record.reward) + " \u00b7 score " + num(record.score) + " \u00b7 " +
      record.turns_total + " turn(s)"));
    if (record.env_error) { box.appendChild(field("Env error", record.env_error, "error")); }
    record.turns.forEach(function (turn, k) { box.appendChild(renderTurn(turn, k)); });
    if (record.turns_total > record.turns.length) {
      box.appendChild(el("p", "note", (record.turns_total - record.turns.length) + " later turn(s) left out."));
    }
  }
  function filtered() {
    return steps[state.index].records.filter(function (r) {
      return (!state.pick || r.pick === state.pick) && (!state.env || r.env === state.env);
    });
  }
  function choose(i, focus) { state.chosen = i; render(focus); }
  function row(record, i) {
    var tr = el("tr", i === state.chosen ? "chosen" : null);
    tr.tabIndex = 0;
    [record.pick, record.env, shown(record.seed)].forEach(function (v) { tr.appendChild(el("td", null, v)); });
    tr.appendChild(record.success ? el("td", "yes", "\u2713 yes") : el("td", "no", "\u2717 no"));
    tr.appendChild(el("td", "mono", num(record.reward)));
    tr.appendChild(el("td", null, record.turns_total));
    tr.addEventListener("click", function () { choose(i, false); });
    tr.addEventListener("keydown", function (e) {
      var to = {ArrowDown: i + 1, ArrowUp: i - 1, Enter: i, " ": i}[e.key];
      if (to === undefined) { return; }
      e.preventDefault();
      if (to >= 0 && to < filtered().length) { choose(to, true); }
    });
    return tr;
  }
  function render(focus) {
    var records = filtered();
    var body = byId("v-list").tBodies[0];
    clear(body);
    if (state.chosen >= records.length) { state.chosen = 0; }
    records.forEach(function (record, i) { body.appendChild(row(record, i)); });
    byId("v-count").textContent = records.length + " of " + steps[state.index].records.length +
      " trajectories of step " + steps[state.index].step;
    byId("v-step").value = String(state.index);
    byId("v-prev").disabled = state.index === 0;
    byId("v-next").disabled = state.index === steps.length - 1;
    renderDetail(records[state.chosen]);
    if (focus && body.rows[state.chosen]) { body.rows[state.chosen].focus(); }
  }
  function setUp() {
    var stepSelect = byId("v-step");
    var envs = {};
    steps.forEach(function (s, i) {
      var option = el("option", null, "step " + s.step + " (" + s.records.length + ")");
      option.value = String(i);
      stepSelect.appendChild(option);
      s.records.forEach(function (r) { envs[r.env] = true; });
    });
    Object.keys(envs).sort().forEach(function (name) {
      var option = el("option", null, name);
      option.value = name;
      byId("v-env").appendChild(option);
    });
    stepSelect.addEventListener("change", function () { state.index = Number(stepSelect.value); choose(0, false); });
    byId("v-prev").addEventListener("click", function () { state.index -= 1; choose(0, false); });
    byId("v-next").addEventListener("click", function () { state.index += 1; choose(0, false); });
    byId("v-pick").addEventListener("change", function (e) { state.pick = e.target.value; choose(0, false); });
    byId("v-env").addEventListener("change", function (e) { state.env = e.target.value; choose(0, false); });
  }
  setUp();
  render(false);
  document.body.dataset.viewer = "ready";
})();
"""
