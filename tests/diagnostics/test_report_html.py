"""``report.html``: the self-contained page with the plots and the trajectory viewer over ``samples.jsonl``.

The browser tests open the page in headless Chromium (``chromium --headless --dump-dom`` / ``--screenshot``). They
skip without Chromium (``apt-get install -y chromium``; ``make test-packages``), except under
``RAGEN_REQUIRE_CHROMIUM=1`` (CI), which turns the absence into a failure. The rest is plain Python: reading the
samples, thinning, escaping, and the plots' axes.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ragen_plugins_diagnostics.report import load_run, write_report
from ragen_plugins_diagnostics.report_html import Page, embed_json, render_html
from ragen_plugins_diagnostics.report_plots import PLOTS, draw
from ragen_plugins_diagnostics.report_samples import CUT, read_samples, thin
from tests.diagnostics.test_report import write_run

HOSTILE = "</script><img src=x onerror=alert(1)>"
GRID = "P _ _\n_ H _\n_ _ G"
SCRIPT_DATA = re.compile(r'<script type="application/json" id="samples-data">(.*?)</script>', re.S)


def metrics(steps: int = 6) -> list[dict[str, Any]]:
    """Every plotted family over ``steps`` steps; validation (sparse) at steps 0, 3 and 6; one echo-trap point."""
    records: list[dict[str, Any]] = [{"step": 0, "val/success": 0.1, "val/reward_mean": -0.1,
                                      "val/format_penalty_rate": 0.4, "val/truncated_rate": 0.2}]
    for s in range(1, steps + 1):
        t = s / steps
        r: dict[str, Any] = {
            "step": s, "train/success": 0.5 * t, "rollout/reward_mean": t - 0.2, "rollout/in_group_reward_std": 0.5,
            "rollout/chosen_in_group_reward_std": 0.6, "rollout/filter_kept_ratio": 0.75,
            "rollout/format_penalty_rate": 0.5 * (1 - t), "rollout/truncated_rate": 0.2 * (1 - t),
            "actor/entropy": 1.0 - 0.3 * t, "actor/pg_loss": 0.01 * (-1) ** s, "critic/vf_loss": 12000.0 * (1 - t),
            "actor/kl_loss": 2e-4 * s, "rollout/response_length_mean": 1500.0 - 100 * s}
        if s in (1, 4):
            r.update({"collapse/first_turn/mi_estimate": 1.0 - 0.4 * t, "collapse/first_turn/mi_fraction": 0.8 - t / 3,
                      "collapse/first_turn/conditional_entropy_est": 1.0, "collapse/first_turn/regime": 0.0})
        if s == steps:
            r["echo_trap/duplicate_rate"] = 0.3
        if s % 3 == 0:
            r.update({"val/success": 0.1 + 0.5 * t, "val/reward_mean": t, "val/format_penalty_rate": 0.4 * (1 - t),
                      "val/truncated_rate": 0.2 * (1 - t)})
        records.append(r)
    return records


def turn(observation: str = GRID, response: str = "<think>go</think><answer>Down</answer>", **extra: Any
         ) -> dict[str, Any]:
    return {"observation": observation, "response": response, "reasoning": "go", "answer": "Down",
            "actions": ["Down"], "reward": 0.0, "format_penalty": 0.0, "format_ok": True, "truncated": False,
            "info": {"success": False}, **extra}


def sample(step: int, pick: str = "best", env: str = "frozenlake", **extra: Any) -> dict[str, Any]:
    return {"step": step, "pick": pick, "env": env, "group_id": 1, "seed": 10 + step, "episode_id": 2,
            "success": pick == "best", "reward": 1.0 if pick == "best" else 0.0, "score": 0.5, "env_error": None,
            "turns": [turn()], **extra}


def write_samples(root: Path, records: list[dict[str, Any]], extra_lines: tuple[str, ...] = (), end: str = "\n"
                  ) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(r) for r in records] + list(extra_lines)
    (root / "samples.jsonl").write_text("\n".join(lines) + end, encoding="utf-8")
    return root


def embedded(page: str) -> dict[str, Any]:
    """The JSON the page embeds for its viewer."""
    match = SCRIPT_DATA.search(page)
    assert match is not None, "the page embeds no samples"
    return json.loads(match.group(1))


# --------------------------------------------------------------------------------------------- the samples

def test_a_later_write_of_a_step_replaces_the_earlier_one(tmp_path: Path) -> None:
    first = [sample(1), sample(1, "worst"), sample(2, env="old"), sample(2, "worst", env="old"),
             sample(3, env="old"), sample(3, "worst", env="old"), sample(3, "random", env="old")]
    resumed = [sample(3, env="new"), sample(3, "random", env="new"),  # right after step 3: the picks start over
               sample(2, env="new"), sample(2, "worst", env="new"),  # after step 3: a new write of step 2
               sample(4, env="x")]
    run = write_samples(tmp_path, first + resumed, extra_lines=('{"step": 5, "pick": "be',), end="")
    samples = read_samples(run)
    assert samples.present and samples.recorded == 4 and samples.skipped == 1
    assert {s: [(r["pick"], r["env"]) for r in recs] for s, recs in samples.steps.items()} == {
        1: [("best", "frozenlake"), ("worst", "frozenlake")], 2: [("best", "new"), ("worst", "new")],
        3: [("best", "new"), ("random", "new")], 4: [("best", "x")]}


def test_a_torn_line_ends_a_write_and_other_bad_lines_are_counted(tmp_path: Path) -> None:
    # a killed run's torn line, then the resumed run writes step 2 again (same picks, contiguous otherwise)
    run = write_samples(tmp_path, [sample(1), sample(2, env="old")],
                        extra_lines=('{"step": 2, "pick": "wor', json.dumps(sample(2, env="new")), "[1, 2]",
                                     '{"step": "3"}', '{"step": true}', "not json", ""))
    samples = read_samples(run)
    assert samples.skipped == 5
    assert [r["env"] for r in samples.steps[2]] == ["new"]
    assert any("5 line(s) of samples.jsonl were not readable" in note for note in samples.notes())


def test_without_samples_the_page_says_how_to_turn_them_on(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", [{"step": 1, "other/metric": 0.5}])  # nothing to plot: fast
    samples = read_samples(run)
    assert not samples.present and not samples.steps
    md = write_report(run).read_text()
    page = (run / "report.html").read_text()
    assert "run.trajectory_samples=N" in page and 'id="samples-data"' not in page
    assert "run.trajectory_samples=N" in md
    write_samples(run, [], extra_lines=("garbage",))
    page = (write_report(run).parent / "report.html").read_text()
    assert "holds no readable record (1 line(s) skipped)" in page and "run.trajectory_samples=N" in page


@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 3000), limit=st.integers(1, 300))
def test_thinning_keeps_the_last_step_and_spreads_evenly(n: int, limit: int) -> None:
    steps = list(range(3, 3 + 2 * n, 2))
    kept = thin(steps, limit)
    assert kept == sorted(set(kept)) and set(kept) <= set(steps)
    assert len(kept) == min(n, limit)
    if n:
        assert kept[-1] == steps[-1]
    if n > limit >= 2:
        assert kept[0] == steps[0]
        gaps = {b - a for a, b in zip(kept, kept[1:])}
        assert max(gaps) - min(gaps) <= 2  # one step of the series (2) at most between the widest and narrowest


def test_the_page_embeds_a_bounded_sample(tmp_path: Path) -> None:
    long = "x" * 50
    records = [sample(s, turns=[turn(response=long)]) for s in range(1, 24)]
    records += [sample(23, "random", env=f"e{k}") for k in range(12)]  # 12 random ones: 10 are kept
    samples = read_samples(write_samples(tmp_path, records), max_steps=5, max_text=20)
    assert sorted(samples.steps) == [1, 7, 12, 17, 23] and samples.recorded == 23
    assert samples.steps[1][0]["turns"][0]["response"] == "x" * 20 + CUT
    assert len(samples.steps[23]) == 1 + 10 and samples.left_out == 2
    notes = " ".join(samples.notes())
    assert "Steps thinned: 5 of the 23 sampled steps are shown" in notes
    assert "text(s) longer than 20 characters are cut" in notes and "2 trajectories, turns or actions" in notes
    # a byte budget thins further (23 steps, then 11, then 5 fit in this one), still ending with the last step
    full = read_samples(tmp_path)
    one, last = len(json.dumps(full.steps[1])), len(json.dumps(full.steps[23]))
    small = read_samples(tmp_path, max_bytes=last + 4 * one + 50)
    assert len(small.steps) == 5 and max(small.steps) == 23


def test_odd_values_are_normalised_for_the_script(tmp_path: Path) -> None:
    odd = sample(1, reward=float("nan"), seed=[1, 2], success="yes", env_error={"code": 1},
                 turns=["just text", turn(reward=float("inf"), actions="Up", info=None, format_ok=1)])
    (rec,) = read_samples(write_samples(tmp_path, [odd])).steps[1]
    assert rec["reward"] is None and rec["seed"] == "[1, 2]" and rec["success"] is None
    assert rec["env_error"] == '{"code": 1}'
    first, second = rec["turns"]
    assert first["response"] == "just text" and first["actions"] == [] and first["observation"] == ""
    assert second["reward"] is None and second["actions"] == ["Up"] and second["info"] == ""
    assert second["format_ok"] is None
    json.loads(embed_json({"r": rec}))  # no NaN left: the page's JSON.parse would refuse it


# --------------------------------------------------------------------------------------------- escaping

def test_embedded_json_cannot_close_its_script_tag() -> None:
    data = {"t": HOSTILE + "<!-- & </SCRIPT > \u2028 \ud800"}
    text = embed_json(data)
    assert not set("<>&") & set(text) and text.isascii()
    assert json.loads(text) == data


_TEXT = st.one_of(st.text(max_size=40), st.text(st.characters(categories=["Cs", "Ll", "Po", "Sm", "Zl", "Cc"]),
                                                 max_size=20),
                  st.sampled_from([HOSTILE, "<!--<script>", "]]>&amp;", "\u2028\u2029", "</SCRIPT >"]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(env=_TEXT, observation=_TEXT, response=_TEXT, actions=st.lists(_TEXT, max_size=3))
@example(env="\ud800\udc00", observation="\ud800", response="\ud800\udc00", actions=["\udc00"])  # CI found it
def test_any_text_round_trips_through_the_page(tmp_path: Path, env: str, observation: str, response: str,
                                                actions: list[str]) -> None:
    record = sample(1, env=env, turns=[turn(observation=observation, response=response, actions=actions)])
    samples = read_samples(write_samples(tmp_path, [record]))
    page = render_html(Page("t", [], [], [], [], [], samples))
    assert page.count("</script>") == page.count("<script")  # the data closed no tag early
    (shown,) = embedded(page)["steps"][0]["records"]
    # as JSON text reads it back: two lone surrogates that form a pair ("\ud800\udc00") are one character there
    # (a model's decoded output never holds surrogates; the test draws them to try the escaping)
    env, observation, response, actions = json.loads(json.dumps([env, observation, response, actions]))
    assert shown["env"] == (env or "?")
    assert (shown["turns"][0]["observation"], shown["turns"][0]["response"]) == (observation, response)
    assert shown["turns"][0]["actions"] == actions


def test_page_text_outside_the_data_is_escaped(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", [{"step": 1, "other/metric": 0.5}],
                    summary={"status": "completed", "steps": 1, "stop_reason": HOSTILE},
                    config={"trainer": {"name": "torch", "model": HOSTILE, "steps": 1}})
    write_report(run)
    page = (run / "report.html").read_text()
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page


# --------------------------------------------------------------------------------------------- the plots

def _step_axes(fig: Any) -> list[Any]:
    return [ax for ax in fig.axes if ax.get_xlabel() == "step"]


def test_step_axes_have_integer_ticks(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "r", metrics(4)))
    checked = 0
    for spec in PLOTS:
        fig = draw(run, spec.name)
        if fig is None or isinstance(fig, str):
            continue
        for ax in _step_axes(fig):
            ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
            assert ticks and all(float(t).is_integer() for t in ticks), (spec.name, ticks)
            checked += 1
    assert checked >= 10


def test_filter_plot_is_skipped_when_the_filter_kept_everything(tmp_path: Path) -> None:
    records = [{"step": s, "rollout/in_group_reward_std": 0.1 * s, "rollout/chosen_in_group_reward_std": 0.1 * s}
               for s in range(1, 4)]
    kept_all = load_run(write_run(tmp_path / "a", records))
    assert "chosen = all groups at every step" in draw(kept_all, "filter")
    unfiltered = load_run(write_run(tmp_path / "b", [{**r, "rollout/chosen_in_group_reward_std": 1.0}
                                                     for r in records], config={"filter": {"name": "none"}}))
    assert "filter: none" in draw(unfiltered, "filter")
    md = write_report(tmp_path / "a").read_text()
    assert "Filter effect: not drawn: the filter kept every group" in md and not (tmp_path / "a/filter.png").exists()
    filtered = load_run(write_run(tmp_path / "c", [{**r, "rollout/chosen_in_group_reward_std": 1.0}
                                                   for r in records]))
    assert not isinstance(draw(filtered, "filter"), str)


def test_a_single_point_is_a_visible_marker(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "r", [{"step": 5, "echo_trap/duplicate_rate": 0.4}]))
    (ax,) = draw(run, "echo_trap").axes
    (line,) = ax.get_lines()
    assert line.get_marker() == "o" and line.get_markersize() >= 5
    assert ax.get_xlim()[0] < 5 < ax.get_xlim()[1] and ax.get_ylim()[0] < 0.4 < ax.get_ylim()[1]


def test_validation_is_drawn_as_markers(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "r", metrics(6)))
    (ax,) = draw(run, "success").axes
    by_label = {line.get_label(): line for line in ax.get_lines()}
    val = by_label["validation"]
    assert val.get_linestyle() == "None" and val.get_marker() == "o" and list(val.get_xdata()) == [0, 3, 6]
    joins = [line for line in ax.get_lines() if line.get_label().startswith("_") and line.get_color() == val.get_color()]
    assert joins and all(line.get_linestyle() == ":" and line.get_alpha() <= 0.5 for line in joins)


def _tick_labels(axis: Any) -> list[Any]:
    """The drawn tick labels of an axis (those of ticks inside its view; a twin's on the right are ``label2``)."""
    low, high = sorted(axis.get_view_interval())
    return [label for tick in axis.get_major_ticks() if low - 1e-9 <= tick.get_loc() <= high + 1e-9
            for label in (tick.label1, tick.label2) if label.get_visible() and label.get_text()]


def test_labels_fit_in_their_figure_and_do_not_overlap(tmp_path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    run = load_run(write_run(tmp_path / "r", metrics(6)))
    for name in ("collapse", "losses", "reward_std"):  # a twin axis, large tick values, two rows
        fig = draw(run, name)
        renderer = FigureCanvasAgg(fig).get_renderer()
        fig.draw(renderer)
        labels, ticks = [], []
        for ax in fig.axes:
            labels += [t for t in (ax.title, ax.xaxis.label, ax.yaxis.label) if t.get_text()]
            ticks += _tick_labels(ax.xaxis) + _tick_labels(ax.yaxis)
        boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in labels + ticks]
        frame = fig.bbox
        for text, box in boxes:
            assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1, \
                f"{name}: {text!r} is clipped ({box} outside {frame})"
        for i, (text, box) in enumerate(boxes[:len(labels)]):  # each title and axis label against every other text
            for other, other_box in boxes[i + 1:]:
                assert not box.overlaps(other_box), f"{name}: {text!r} overlaps {other!r}"


# --------------------------------------------------------------------------------------------- the page in Chromium

def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("RAGEN_REQUIRE_CHROMIUM") == "1":
            pytest.fail("chromium is required (RAGEN_REQUIRE_CHROMIUM=1): apt-get install -y chromium "
                        "(make test-packages)")
        pytest.skip("chromium is not installed (apt-get install -y chromium, or make test-packages)")
    return path


def _browse(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
           f"--user-data-dir={profile}", *args, page.as_uri()]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run with every plot, sparse validation, and samples of 6 steps: the last step's first trajectory has a
    grid observation and a hostile response."""
    root = write_run(tmp_path_factory.mktemp("html") / "run", metrics(6),
                     config={"trainer": {"name": "torch", "model": "tiny", "steps": 6},
                             "filter": {"name": "top_p", "value": 0.9}},
                     summary={"status": "completed", "steps": 6})
    records = [sample(s, pick) for s in range(1, 6) for pick in ("best", "worst")]
    records += [sample(6, "worst", env="sokoban", success=False, turns=[
        turn(observation="#####\n#P_X#\n#####", response=HOSTILE, reasoning="", answer="", actions=[],
             format_ok=False, format_penalty=-0.1, truncated=True), turn()]), sample(6, "random")]
    write_samples(root, records, extra_lines=('{"step": 7, "pick": "be',), end="")
    write_report(root)
    return root


def test_the_page_is_self_contained(report_dir: Path) -> None:
    page = (report_dir / "report.html").read_text()
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", page, re.I)
    assert not re.search(r"@import|url\(", page)
    images = re.findall(r"<img [^>]*src=\"([^\"]*)\"", page)
    assert len(images) == len(list(report_dir.glob("*.png"))) == 10
    assert all(src.startswith("data:image/png;base64,") for src in images)
    assert "<" not in SCRIPT_DATA.search(page).group(1)  # type: ignore[union-attr]
    assert "Filter effect" in page and "Key metrics" in page and "status: completed, steps: 6" in page


def test_the_viewer_renders_in_chromium(report_dir: Path, tmp_path: Path) -> None:
    dom = _browse(report_dir / "report.html", tmp_path / "profile", "--dump-dom").stdout
    assert 'data-viewer="ready"' in dom
    errors = re.search(r'<pre id="page-errors"[^>]*>(.*?)</pre>', dom, re.S)
    assert errors is not None and errors.group(1) == ""
    assert '<pre class="obs">#####\n#P_X#\n#####</pre>' in dom  # the last step's first trajectory, grid kept
    assert "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in dom  # the hostile response, as text
    assert not re.search(r"<img[^>]+src=\"?x", dom)
    assert '<span class="badge bad">format penalised (-0.1)</span>' in dom
    assert '<span class="badge warn">truncated</span>' in dom
    assert "step 6 (2)" in dom and "2 of 2 trajectories of step 6" in dom
    assert len(re.findall(r'<img [^>]*src="data:image/png;base64,', dom)) == 10


def test_a_screenshot_of_the_page_is_not_blank(report_dir: Path, tmp_path: Path) -> None:
    from PIL import Image

    shot = tmp_path / "page.png"
    _browse(report_dir / "report.html", tmp_path / "profile", "--hide-scrollbars", "--window-size=1280,2400",
            f"--screenshot={shot}")
    with Image.open(shot) as image:
        assert image.size == (1280, 2400)
        small = image.convert("RGB").resize((320, 600))
    colours = small.getcolors(maxcolors=320 * 600)
    assert colours is not None and len(colours) > 200
    background = max(colours)[0]
    assert background < 0.9 * 320 * 600, "the page is mostly one colour"
    assert math.isclose(sum(n for n, _c in colours), 320 * 600)
