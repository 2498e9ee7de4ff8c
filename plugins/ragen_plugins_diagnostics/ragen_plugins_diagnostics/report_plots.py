"""The run report's plots (matplotlib's Agg renderer, no display needed), each made only when its metrics exist:

- ``success.png``: ``train/success`` and ``val/success`` over steps;
- ``reward.png``: ``rollout/reward_mean`` (and ``val/reward_mean``);
- ``reward_std.png``: ``rollout/in_group_reward_std`` and ``rollout/filter_kept_ratio``;
- ``rates.png``: the format-penalty and truncation rates of training (``rollout/…``) and validation (``val/…``);
- ``entropy.png``: ``actor/entropy``;
- ``losses.png``: ``actor/pg_loss``, ``critic/vf_loss`` and ``actor/kl_loss``, each on its own axis;
- ``response_length.png``: ``rollout/response_length_mean``;
- ``collapse.png``: per collapse family, MI and H(Z|X) over steps and the path in the (H(Z|X), MI / log N) plane
  with the regime thresholds, points coloured by regime;
- ``filter.png``: the reward std of the chosen groups against all groups; not drawn when the filter kept every
  group (``filter: none``, or the chosen groups' std equal to all groups' at every step): a note says so instead;
- ``echo_trap.png``: reasoning duplicate rates and distinct-2 over steps.

Step axes have integer ticks; validation metrics (logged every few steps) are markers with a faint dotted line;
series of few points have large markers, so that a single point is visible. Margins are fixed in inches (an
automatic layout engine costs seconds per figure) and leave room for the labels of twin axes.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from .report_data import FAMILIES, REGIME_COLOURS, REGIME_NAMES, RunData

__all__ = ["PLOTS", "Plot", "PlotSpec", "draw", "make_plots"]

#: a plot function: the figure, a note saying why it is not drawn, or None when its metrics are missing
Drawn = Any  # matplotlib Figure | str | None (matplotlib is imported lazily)


@attrs.frozen
class PlotSpec:
    """One plot of the report: its file name (``NAME.png``), title, caption and drawing function; ``wide`` plots
    take the whole width of the HTML page."""

    name: str
    title: str
    caption: str
    draw: Callable[[RunData], Drawn]
    wide: bool = False


@attrs.frozen
class Plot:
    """A drawn plot: its spec, the PNG's path and bytes."""

    spec: PlotSpec
    path: Path
    png: bytes


# --------------------------------------------------------------------------------------------- helpers

def _figure(rows: int, cols: int, size: tuple[float, float], twin: bool = False) -> tuple[Any, Any]:
    """A figure with margins fixed in inches (an automatic layout engine costs seconds per figure): room for the
    y label and tick labels on the left, and on the right too when the axes have ``twin`` y axes."""
    from matplotlib.figure import Figure

    width, height = size
    left, right, bottom, top = 0.85, 0.85 if twin else 0.25, 0.6, 0.45
    gap_w, gap_h = 0.9 + (0.85 if twin else 0.0), 0.8
    axis_w = (width - left - right - (cols - 1) * gap_w) / cols
    axis_h = (height - bottom - top - (rows - 1) * gap_h) / rows
    fig = Figure(figsize=size)
    fig.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height, top=1 - top / height,
                        wspace=gap_w / axis_w, hspace=gap_h / axis_h)
    return fig, fig.subplots(rows, cols, squeeze=False)


def _steps_axis(ax: Any) -> None:
    """Label the x axis ``step`` and give it integer ticks (never 1.25, 1.5), also when it spans one or two steps
    (widened to two steps around their middle). Call it once the data is drawn."""
    from matplotlib.ticker import MaxNLocator

    ax.set_xlabel("step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    low, high = ax.get_xlim()
    if high - low < 2:
        ax.set_xlim((low + high) / 2 - 1, (low + high) / 2 + 1)


def _series(ax: Any, run: RunData, key: str, label: str, colour: str | None = None) -> bool:
    """Draw one metric over steps: a line with markers while there are few points (large ones for up to 10
    points, so that a single point shows), or for validation (``val/…``, logged every few steps) markers joined by
    a faint dotted line only. False when the run lacks the metric."""
    steps, values = run.series(key)
    if not values:
        return False
    if key.startswith("val/"):
        (points,) = ax.plot(steps, values, "o", markersize=5, color=colour, label=label, zorder=3)
        ax.plot(steps, values, ":", linewidth=1, alpha=0.4, color=points.get_color(), zorder=2)
    else:
        ax.plot(steps, values, marker="o" if len(values) < 40 else None, markersize=6 if len(values) <= 10 else 3,
                color=colour, label=label, zorder=2)
    return True


def _finish(ax: Any, title: str, ylabel: str, legend: bool = True, ylim: tuple[float, float] | None = None) -> None:
    _steps_axis(ax)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.grid(alpha=0.3)
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)


def _lines(run: RunData, height: float, series: tuple[tuple[str, str, str], ...], title: str, ylabel: str,
           ylim: tuple[float, float] | None = None) -> Any:
    """One axis of ``series`` (``(key, label, colour)``; a metric the run lacks is left out)."""
    fig, axes = _figure(1, 1, (7, height))
    for key, label, colour in series:
        _series(axes[0][0], run, key, label, colour)
    _finish(axes[0][0], title, ylabel, ylim=ylim)
    return fig


# --------------------------------------------------------------------------------------------- the plots

def _plot_success(run: RunData) -> Drawn:
    if not (run.has("train/success") or run.has("val/success")):
        return None
    return _lines(run, 3.6, (("train/success", "train", "C0"), ("val/success", "validation", "C1")), "Success",
                  "success rate", ylim=(-0.02, 1.02))


def _plot_reward(run: RunData) -> Drawn:
    if not (run.has("rollout/reward_mean") or run.has("val/reward_mean")):
        return None
    return _lines(run, 3.2, (("rollout/reward_mean", "train (rollout/reward_mean)", "C0"),
                             ("val/reward_mean", "validation (val/reward_mean)", "C1")),
                  "Reward", "mean reward per trajectory")


def _plot_reward_std(run: RunData) -> Drawn:
    keys = [k for k in ("rollout/in_group_reward_std", "rollout/filter_kept_ratio") if run.has(k)]
    if not keys:
        return None
    fig, axes = _figure(len(keys), 1, (7, 0.5 + 2.7 * len(keys)))
    titles = {"rollout/in_group_reward_std": ("in-group reward std", "reward std (mean over groups)"),
              "rollout/filter_kept_ratio": ("filter kept ratio", "kept groups / groups")}
    for ax, key in zip((row[0] for row in axes), keys):
        _series(ax, run, key, titles[key][0])
        _finish(ax, titles[key][0], titles[key][1], legend=False,
                ylim=(-0.02, 1.05) if key == "rollout/filter_kept_ratio" else None)
    return fig


_RATES = (("rollout/format_penalty_rate", "format penalty (train)", "C3"),
          ("val/format_penalty_rate", "format penalty (validation)", "C3"),
          ("rollout/truncated_rate", "truncated (train)", "C1"),
          ("val/truncated_rate", "truncated (validation)", "C1"))


def _plot_rates(run: RunData) -> Drawn:
    if not any(run.has(key) for key, _label, _colour in _RATES):
        return None
    return _lines(run, 3.4, _RATES, "Format penalty and truncation", "share of turns", ylim=(-0.02, 1.02))


def _single(key: str, label: str, colour: str, title: str, ylabel: str) -> Callable[[RunData], Drawn]:
    """A plot of one metric over steps (None when the run lacks it)."""

    def plot(run: RunData) -> Drawn:
        if not run.has(key):
            return None
        fig, axes = _figure(1, 1, (7, 3.0))
        _series(axes[0][0], run, key, label, colour)
        _finish(axes[0][0], title, ylabel, legend=False)
        return fig

    return plot


_plot_entropy = _single("actor/entropy", "actor/entropy", "C4", "Policy entropy", "entropy (nats/token)")
_plot_response_length = _single("rollout/response_length_mean", "response length", "C9", "Response length",
                                "tokens per response (mean)")


_LOSSES = (("actor/pg_loss", "policy-gradient loss (actor/pg_loss)"), ("critic/vf_loss", "value loss (critic/vf_loss)"),
           ("actor/kl_loss", "KL loss (actor/kl_loss)"))


def _plot_losses(run: RunData) -> Drawn:
    keys = [(key, title) for key, title in _LOSSES if run.has(key)]
    if not keys:
        return None
    fig, axes = _figure(len(keys), 1, (7, 0.5 + 2.4 * len(keys)))
    for (ax,), (key, title), colour in zip(axes, keys, ("C0", "C2", "C5")):
        _series(ax, run, key, key, colour)
        _finish(ax, title, "loss", legend=False)
    return fig


def _regime_colours(regimes: dict[int, float], steps: list[int]) -> list[str]:
    """Each step's regime colour (grey where no regime was reported)."""
    return [REGIME_COLOURS[int(regimes[s])] if s in regimes and 0 <= regimes[s] < 4 else "#7f7f7f" for s in steps]


def _collapse_over_steps(ax: Any, run: RunData, family: str, h_thr: float) -> None:
    """MI per token and per sequence (points coloured by regime) and H(Z|X) on a twin axis, over steps."""
    p = f"collapse/{family}/"
    steps_h, h = run.series(p + "conditional_entropy_est")
    regimes = dict(zip(*run.series(p + "regime")))
    for key, label, style in ((p + "mi_estimate", "MI per token", "-"), (p + "mi_seq_estimate", "MI sequence", "--")):
        steps, values = run.series(key)
        if values:
            ax.plot(steps, values, style, color="#444444", label=label, zorder=1)
            ax.scatter(steps, values, c=_regime_colours(regimes, steps), s=25, zorder=2)
    ax.set(ylabel="MI (nats)", title=f"{family}: MI and H(Z|X) over steps")
    right_axis = ax.twinx()
    right_axis.plot(steps_h, h, ":", marker="." if len(h) < 40 else None, color="#9467bd", label="H(Z|X) per token")
    _steps_axis(ax)
    right_axis.set_ylabel("H(Z|X) (nats/token)")
    right_axis.set_ylim(0, max(max(h), h_thr) * 1.25 or 1.0)
    handles = ax.get_legend_handles_labels()[0] + right_axis.get_legend_handles_labels()[0]
    ax.legend(handles=handles, loc="best", fontsize=8)
    ax.grid(alpha=0.3)


def _collapse_plane(ax: Any, run: RunData, family: str, h_thr: float, mi_thr: float) -> None:
    """The path of the run in the (H(Z|X), MI / log N) plane with the regime thresholds."""
    p = f"collapse/{family}/"
    entropy = dict(zip(*run.series(p + "conditional_entropy_est")))
    regimes = dict(zip(*run.series(p + "regime")))
    steps_f, frac = run.series(p + "mi_fraction")
    points = [(s, entropy[s], v) for s, v in zip(steps_f, frac) if s in entropy]
    if points:
        xs, ys = [x for _s, x, _y in points], [y for _s, _x, y in points]
        ax.plot(xs, ys, "-", color="#bbbbbb", zorder=1)
        ax.scatter(xs, ys, c=_regime_colours(regimes, [s for s, _x, _y in points]), s=30, zorder=2)
        for s, x, y in (points[0], points[-1]):
            ax.annotate(f"step {s}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
        ax.set_xlim(0, max(max(xs), h_thr) * 1.2 or 1.0)
        ax.set_ylim(min(0.0, min(ys)) - 0.05, max(1.0, max(ys)) + 0.05)
    ax.axvline(h_thr, color="#888888", linewidth=0.8)
    ax.axhline(mi_thr, color="#888888", linewidth=0.8)
    for colour, name in zip(REGIME_COLOURS, REGIME_NAMES):
        ax.scatter([], [], c=colour, label=name)
    ax.legend(loc="best", fontsize=8)
    ax.set(xlabel="H(Z|X) (nats/token)", ylabel="MI / log N", title=f"{family}: regime plane")
    ax.grid(alpha=0.3)


def _plot_collapse(run: RunData) -> Drawn:
    families = [f for f in FAMILIES if run.has(f"collapse/{f}/conditional_entropy_est")
                and run.has(f"collapse/{f}/mi_estimate")]
    if not families:
        return None
    h_thr = run.collapse_option("entropy_threshold", 0.5)
    mi_thr = run.collapse_option("mi_fraction_threshold", 0.5)
    fig, axes = _figure(len(families), 2, (12, 0.5 + 3.8 * len(families)), twin=True)
    for (left, plane), family in zip(axes, families):
        _collapse_over_steps(left, run, family, h_thr)
        _collapse_plane(plane, run, family, h_thr, mi_thr)
    return fig


def _filter_kept_everything(run: RunData) -> bool:
    """The filter kept every group: ``filter: none``, or the chosen groups' reward std equal to all groups' at
    every step that has both."""
    if run.setting("filter.name") == "none":
        return True
    everything = dict(zip(*run.series("rollout/in_group_reward_std")))
    chosen = dict(zip(*run.series("rollout/chosen_in_group_reward_std")))
    common = set(everything) & set(chosen)
    return bool(common) and all(math.isclose(everything[s], chosen[s], rel_tol=1e-9, abs_tol=1e-12) for s in common)


def _plot_filter(run: RunData) -> Drawn:
    if not (run.has("rollout/chosen_in_group_reward_std") and run.has("rollout/in_group_reward_std")):
        return None
    if _filter_kept_everything(run):
        return ("not drawn: the filter kept every group (" + ("filter: none" if run.setting("filter.name") == "none"
                                                              else "chosen = all groups at every step")
                + "), so the chosen groups' reward std is that of all groups.")
    return _lines(run, 3.6, (("rollout/in_group_reward_std", "all groups", "C0"),
                             ("rollout/chosen_in_group_reward_std", "chosen groups", "C2")),
                  "Filter effect: reward std of chosen vs all groups", "in-group reward std")


def _plot_echo(run: RunData) -> Drawn:
    keys = [k for k in ("echo_trap/duplicate_rate", "echo_trap/cross_group_duplicate_rate", "echo_trap/distinct_2")
            if run.has(k)]
    if not keys:
        return None
    fig, axes = _figure(1, 1, (7, 3.6))
    ax = axes[0][0]
    for key in keys:
        _series(ax, run, key, key.split("/", 1)[1].replace("_", " "))
    _finish(ax, "Reasoning repetitiveness (echo trap)", "rate", ylim=(-0.02, 1.02))
    return fig


PLOTS = (
    PlotSpec("success", "Success", "Training success per step; validation success (markers) when validated.",
             _plot_success),
    PlotSpec("reward", "Reward", "Mean reward per trajectory in training; in validation (markers) when validated.",
             _plot_reward),
    PlotSpec("reward_std", "Reward std and kept ratio",
             "In-group reward std is the learning signal of group-relative estimators; the kept ratio is the share "
             "of groups the filter trains on.", _plot_reward_std),
    PlotSpec("rates", "Format penalty and truncation",
             "Share of turns with the format penalty and share cut by rollout.max_new_tokens, in training (lines) "
             "and validation (markers).", _plot_rates),
    PlotSpec("entropy", "Policy entropy", "Mean token entropy of the policy on the trained responses.",
             _plot_entropy),
    PlotSpec("losses", "Losses", "Each loss on its own axis (their scales differ).", _plot_losses),
    PlotSpec("response_length", "Response length", "Mean generated tokens per turn.", _plot_response_length),
    PlotSpec("collapse", "Reasoning collapse",
             "MI between input and reasoning and the conditional entropy H(Z|X); colours are regimes (green "
             "diverse, orange template collapse, blue compressed, red low-entropy collapse); grey lines are the "
             "regime thresholds.", _plot_collapse, wide=True),
    PlotSpec("filter", "Filter effect", "Reward std of the groups the filter kept against all groups.",
             _plot_filter),
    PlotSpec("echo_trap", "Echo trap", "How often reasoning strings repeat, and the share of distinct word bigrams.",
             _plot_echo),
)


def draw(run: RunData, name: str) -> Drawn:
    """The figure of the plot ``name`` (a :data:`PLOTS` name), a note why it is not drawn, or None."""
    return next(spec for spec in PLOTS if spec.name == name).draw(run)


def make_plots(run: RunData, out: Path) -> tuple[list[Plot], list[str]]:
    """Draw every plot whose metrics exist and write it to ``out/NAME.png``; returns the plots and notes (a plot
    not drawn and why; that matplotlib is missing; that nothing was plottable)."""
    try:
        import matplotlib  # noqa: F401 - availability check
    except ImportError:
        return [], ["Plots skipped: matplotlib is not installed (pip install matplotlib)."]
    plots, notes = [], []
    for spec in PLOTS:
        drawn = spec.draw(run)
        if isinstance(drawn, str):
            notes.append(f"{spec.title}: {drawn}")
        elif drawn is not None:
            buffer = io.BytesIO()
            drawn.savefig(buffer, dpi=100, format="png")
            path = out / f"{spec.name}.png"
            path.write_bytes(buffer.getvalue())
            plots.append(Plot(spec, path, buffer.getvalue()))
    if not plots:
        notes.append("No plottable metrics.")
    return plots, notes
