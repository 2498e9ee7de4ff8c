"""Registration, contract checks, config validation, pinned examples and error handling of the rollout filters."""

from __future__ import annotations

import itertools
import math
import statistics
import subprocess
import sys

import pytest

import ragen_plugins_filters
from ragen_core.config import structure
from ragen_core.errors import ConfigError
from ragen_core.protocols import FilterResult, RolloutFilter
from ragen_core.testing import check_filter
from ragen_plugins_filters.config import METRICS, MinPConfig, TopKAbsConfig, TopKConfig, TopPConfig
from ragen_plugins_filters.filters import MinPFilter, NoFilter, TopKAbsFilter, TopKFilter, TopPFilter
from ragen_plugins_filters.scores import unbiased_std
from tests.filters.helpers import batch_of, traj

NAMES = ["dynamic", "min_p", "none", "top_k", "top_k_abs", "top_p"]
SELECTING = ["min_p", "top_k", "top_k_abs", "top_p"]
METRIC_NAMES = {"rollout/in_group_reward_std", "rollout/in_group_reward_max", "rollout/in_group_reward_mean",
                "rollout/chosen_in_group_reward_std", "rollout/chosen_in_group_reward_max",
                "rollout/chosen_in_group_reward_mean", "rollout/filter_kept_count", "rollout/filter_kept_ratio",
                "rollout/filter_zero_count", "rollout/filter_loss_scale", "rollout/filter_failed_groups"}

#: groups whose unbiased stds are exactly 9, 5 and 1 (values -s, 0, s: mean 0, variance 2s²/2)
STDS_9_5_1 = [[-9.0, 0.0, 9.0], [-5.0, 0.0, 5.0], [-1.0, 0.0, 1.0]]


@pytest.fixture
def filters(ragen_register, ragen_registries):  # noqa: ANN001, ANN201 - pytest fixtures
    """The filter registry with only this plugin registered."""
    ragen_register(ragen_plugins_filters, name="filters")
    return ragen_registries().filters


def kept(result: FilterResult) -> list[int]:
    return list(result.kept_groups)


# ------------------------------------------------------------------------------------------- registration

def test_registers_every_filter_lazily(filters) -> None:  # noqa: ANN001
    assert filters.names() == NAMES
    for spec in filters:
        assert spec.plugin == "filters" and spec.description
        assert isinstance(spec.entry_point, str) and isinstance(spec.config, str)
        assert isinstance(spec.create(), RolloutFilter)


def test_plugin_module_imports_nothing_heavy() -> None:
    code = ("import sys, ragen_plugins_filters; "
            "print(sorted(m for m in sys.modules if m.startswith('ragen_plugins_filters.') or m == 'numpy'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_defaults(filters) -> None:  # noqa: ANN001
    top_p = filters.get("top_p").make_config({}, path="filter")
    assert (top_p.value, top_p.mode, top_p.eps) == (0.9, "linear", 0.01)
    assert (top_p.metric, top_p.order, top_p.include_zero, top_p.loss_scale) == \
        ("reward_variance", "largest", True, "none")
    assert filters.get("top_k").make_config({}).value == 0.25
    assert filters.get("top_k_abs").make_config({}).value == 2.0
    assert filters.get("min_p").make_config({}).value == 0.5
    dyn = filters.get("dynamic").make_config({})
    assert (dyn.max_rounds, dyn.zero_eps, dyn.oversample) == (10, 1e-10, 1.0)


# ------------------------------------------------------------------------------------------- contract

@pytest.mark.parametrize(("name", "metric"), list(itertools.product(SELECTING, METRICS)))
def test_contract(filters, name: str, metric: str) -> None:  # noqa: ANN001
    for order, include_zero in itertools.product(["largest", "smallest"], [True, False]):
        check_filter(filters.get(name).create(metric=metric, order=order, include_zero=include_zero), n_batches=8)


@pytest.mark.parametrize("options", [{"mode": "softmax"}, {"mode": "softmax", "value": 0.3, "order": "smallest"},
                                     {"value": 1.0}, {"loss_scale": "linear"}, {"loss_scale": "sqrt", "eps": 0.0}])
def test_contract_top_p_modes(filters, options: dict) -> None:  # noqa: ANN001
    check_filter(filters.get("top_p").create(**options), n_batches=12)


@pytest.mark.parametrize("metric", METRICS)
def test_contract_none_and_dynamic(filters, metric: str) -> None:  # noqa: ANN001
    check_filter(filters.get("none").create(metric=metric), n_batches=12)
    check_filter(filters.get("dynamic").create(), n_batches=12)


# ------------------------------------------------------------------------------------------- pinned examples

def test_worked_example_linear_top_p_keeps_9_and_5() -> None:
    batch = batch_of(STDS_9_5_1, ids=[10, 20, 30])
    assert [unbiased_std(g) for g in STDS_9_5_1] == [9.0, 5.0, 1.0]
    result = TopPFilter(TopPConfig()).select(batch)  # linear, 0.9: threshold 0.9 × 15 − 0.01 = 13.49
    assert kept(result) == [10, 20]
    assert result.metrics["rollout/filter_kept_count"] == 2.0
    assert result.metrics["rollout/filter_kept_ratio"] == pytest.approx(2 / 3)
    assert result.metrics["rollout/in_group_reward_std"] == pytest.approx(5.0)
    assert result.metrics["rollout/chosen_in_group_reward_std"] == pytest.approx(7.0)
    assert result.metrics["rollout/in_group_reward_max"] == pytest.approx(5.0)  # mean of the maxima 9, 5, 1
    assert result.metrics["rollout/in_group_reward_mean"] == 0.0
    assert result.metrics["rollout/filter_zero_count"] == 0.0
    assert set(result.metrics) == METRIC_NAMES


def test_worked_example_order_of_the_batch_is_kept() -> None:
    batch = batch_of(list(reversed(STDS_9_5_1)), ids=[30, 20, 10])
    assert kept(TopPFilter(TopPConfig()).select(batch)) == [20, 10]


def test_all_zero_batch_keeps_nothing() -> None:
    batch = batch_of([[1.0, 1.0], [0.0, 0.0], [3.0, 3.0, 3.0]])
    result = TopPFilter(TopPConfig()).select(batch)
    assert kept(result) == []
    assert result.metrics["rollout/filter_zero_count"] == 3.0
    assert result.metrics["rollout/chosen_in_group_reward_std"] == 0.0
    assert kept(TopPFilter(TopPConfig(include_zero=False)).select(batch)) == []


def test_value_one_keeps_all() -> None:
    batch = batch_of(STDS_9_5_1 + [[2.0, 2.0]])
    for mode in ("linear", "softmax"):
        assert kept(TopPFilter(TopPConfig(value=1.0, mode=mode)).select(batch)) == [0, 1, 2, 3]
    # include_zero=False first drops the zero-variance group
    assert kept(TopPFilter(TopPConfig(value=1.0, include_zero=False)).select(batch)) == [0, 1, 2]


def test_top_k_quarter_of_eight_groups_keeps_two() -> None:
    batch = batch_of([[0.0, float(i)] for i in range(8)])  # stds grow with i
    assert kept(TopKFilter(TopKConfig(value=0.25)).select(batch)) == [6, 7]
    assert kept(TopKFilter(TopKConfig(value=0.25, order="smallest")).select(batch)) == [0, 1]
    assert kept(TopKFilter(TopKConfig(value=0.01)).select(batch)) == [7]  # at least one
    assert kept(TopKAbsFilter(TopKAbsConfig(value=3.9)).select(batch)) == [5, 6, 7]


def test_softmax_keeps_at_least_one() -> None:
    batch = batch_of([[0.0, 0.0], [1.0, 1.0]])  # all stds 0: uniform probabilities
    assert kept(TopPFilter(TopPConfig(mode="softmax", value=0.01)).select(batch)) == [0]
    assert kept(TopPFilter(TopPConfig(mode="softmax", value=0.5)).select(batch)) == [0]  # 0.5 reaches 0.5
    batch = batch_of(STDS_9_5_1)
    assert kept(TopPFilter(TopPConfig(mode="softmax", value=0.5)).select(batch)) == [0]
    # softmax(9, 5, 1): p(9) ≈ 0.982 < 0.99 → two groups
    assert kept(TopPFilter(TopPConfig(mode="softmax", value=0.99)).select(batch)) == [0, 1]


def test_min_p() -> None:
    batch = batch_of(STDS_9_5_1)
    assert kept(MinPFilter(MinPConfig(value=0.5)).select(batch)) == [0, 1]  # >= 4.5
    assert kept(MinPFilter(MinPConfig(value=0.5, order="smallest")).select(batch)) == [2]  # <= 2
    assert kept(MinPFilter(MinPConfig(value=0.2, order="smallest")).select(batch)) == [1, 2]  # <= 5
    assert kept(MinPFilter(MinPConfig(value=0.1, order="smallest")).select(batch)) == [0, 1, 2]  # <= 10
    assert kept(MinPFilter(MinPConfig(value=1.0)).select(batch)) == [0]


def test_ties_go_to_the_earlier_group() -> None:
    batch = batch_of([[0.0, 1.0], [5.0, 6.0], [0.0, 1.0], [1.0, 0.0]], ids=[7, 3, 9, 1])
    # groups 7, 3, 9, 1 all have the same std; the earliest groups win
    assert kept(TopKAbsFilter(TopKAbsConfig(value=2)).select(batch)) == [7, 3]
    assert kept(TopKAbsFilter(TopKAbsConfig(value=2, order="smallest")).select(batch)) == [7, 3]
    batch = batch_of([[0.0, 0.0], [0.0, 2.0], [2.0, 0.0]], ids=[5, 6, 4])
    assert kept(TopKAbsFilter(TopKAbsConfig(value=1)).select(batch)) == [6]


def test_smallest_linear_follows_ragen() -> None:
    batch = batch_of(STDS_9_5_1)
    # ascending walk 1, 5, 9 until the running sum reaches 13.49
    assert kept(TopPFilter(TopPConfig(order="smallest")).select(batch)) == [0, 1, 2]
    assert kept(TopPFilter(TopPConfig(order="smallest", value=0.3)).select(batch)) == [1, 2]


def test_negative_mass_keeps_nothing_in_linear_top_p() -> None:
    batch = batch_of([[-2.0], [-1.0], [0.5]])
    assert kept(TopPFilter(TopPConfig(metric="reward")).select(batch)) == []


def test_scores_by_metric() -> None:
    batch = batch_of([[1.0, 3.0], [10.0]])
    trajs = batch.trajectories
    trajs[0].mean_entropy, trajs[1].mean_entropy, trajs[2].mean_entropy = 0.5, 1.5, 0.2
    trajs[2].turns[0].response_ids = list(range(40))
    top = {m: kept(TopKAbsFilter(TopKAbsConfig(value=1, metric=m)).select(batch)) for m in METRICS}
    assert top == {"reward_variance": [0], "reward": [1], "reward_sum": [1], "entropy": [0],
                   "entropy_variance": [0], "length": [1]}
    assert kept(TopKAbsFilter(TopKAbsConfig(value=1, metric="reward_sum")).select(batch_of([[6.0, 6.0], [10.0]]))) \
        == [0]


def test_loss_scale_metric() -> None:
    batch = batch_of([[0.0, float(i)] for i in range(4)])
    for scale, want in (("none", 1.0), ("linear", 0.25), ("sqrt", 0.5)):
        result = TopKFilter(TopKConfig(value=0.25, loss_scale=scale)).select(batch)
        assert result.metrics["rollout/filter_loss_scale"] == want


# ------------------------------------------------------------------------------------------- edge cases

def test_single_member_groups_have_std_zero() -> None:
    batch = batch_of([[3.0], [-1.0], [0.0, 2.0]])
    result = NoFilter(NoFilter.config_cls()).select(batch)
    assert kept(result) == [0, 1, 2]
    assert result.metrics["rollout/filter_zero_count"] == 2.0
    assert result.metrics["rollout/in_group_reward_std"] == pytest.approx(math.sqrt(2) / 3)
    assert kept(TopPFilter(TopPConfig(value=1.0, include_zero=False)).select(batch)) == [2]


def test_unbiased_std_matches_statistics() -> None:
    for values in ([1.0, 2.0, 4.0], [0.1, 0.1, 0.7, -3.0], [5.0, 5.0]):
        assert unbiased_std(values) == pytest.approx(statistics.stdev(values), rel=1e-12, abs=1e-15)
    assert unbiased_std([7.0]) == 0.0


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("name", NAMES)
def test_non_finite_scores_name_the_group(filters, name: str, bad: float) -> None:  # noqa: ANN001
    batch = batch_of([[0.0, 1.0], [1.0, bad]], ids=[3, 42])
    with pytest.raises(ValueError, match="group 42"):
        filters.get(name).create().select(batch)


def test_overflowing_statistic_names_the_group() -> None:
    batch = batch_of([[0.0, 1.0], [-1e308, 1e308]], ids=[1, 8])
    with pytest.raises(ValueError, match="group 8"):
        TopPFilter(TopPConfig()).select(batch)


def test_entropy_metric_needs_entropies() -> None:
    batch = batch_of([[0.0, 1.0], [1.0, 2.0]], ids=[1, 5])
    batch.trajectories[3].mean_entropy = None
    with pytest.raises(ValueError, match="group 5.*mean_entropy"):
        TopPFilter(TopPConfig(metric="entropy")).select(batch)
    assert kept(TopPFilter(TopPConfig(value=1.0)).select(batch)) == [1, 5]  # reward metrics do not need them


def test_env_errors_are_excluded() -> None:
    from ragen_core.data import RolloutBatch

    batch = RolloutBatch([traj(1, 0.0), traj(1, 100.0, error="boom"), traj(1, 0.0),  # std 0 without the failure
                          traj(2, 0.0), traj(2, 4.0),
                          traj(3, 9.0, error="boom"), traj(3, -9.0, error="boom"),  # all failed
                          traj(4, float("nan"), error="boom"), traj(4, 1.0)])        # failed NaN ignored
    for name, filt in (("none", NoFilter(NoFilter.config_cls())), ("top_p", TopPFilter(TopPConfig(value=1.0))),
                       ("top_k", TopKFilter(TopKConfig(value=1.0))), ("min_p", MinPFilter(MinPConfig(value=0.01)))):
        result = filt.select(batch)
        assert 3 not in kept(result), name
        assert result.metrics["rollout/filter_failed_groups"] == 1.0
    result = TopKAbsFilter(TopKAbsConfig(value=1)).select(batch)
    assert kept(result) == [2]
    assert result.metrics["rollout/filter_kept_ratio"] == 0.25  # over the 4 groups of the batch
    assert result.metrics["rollout/in_group_reward_max"] == pytest.approx((0.0 + 4.0 + 1.0) / 3)
    assert result.metrics["rollout/filter_zero_count"] == 2.0  # groups 1 and 4 (single usable member)


def test_empty_batch() -> None:
    from ragen_core.data import RolloutBatch

    for filt in (NoFilter(NoFilter.config_cls()), TopPFilter(TopPConfig()), TopKFilter(TopKConfig())):
        result = filt.select(RolloutBatch([]))
        assert kept(result) == [] and result.metrics["rollout/filter_kept_ratio"] == 0.0


# ------------------------------------------------------------------------------------------- config errors

@pytest.mark.parametrize(("name", "options", "message"), [
    ("top_p", {"value": 1.5}, "filter.value: must be a number in (0, 1]: 1.5"),
    ("top_p", {"value": 0}, "filter.value: must be a number in (0, 1]"),
    ("top_p", {"value": -0.2}, "filter.value"),
    ("top_p", {"eps": -0.01}, "filter.eps: must be a finite number >= 0"),
    ("top_p", {"mode": "nucleus"}, "filter.mode"),
    ("top_k", {"value": 2}, "filter.value: must be a number in (0, 1]: 2"),
    ("top_k_abs", {"value": 0.5}, "filter.value: must be a finite number >= 1"),
    ("min_p", {"value": 0.0}, "filter.value"),
    ("min_p", {"metric": "rewards"}, "filter.metric"),
    ("top_k", {"order": "biggest"}, "filter.order"),
    ("top_k", {"include_zero": "no"}, "filter.include_zero"),
    ("top_k", {"loss_scale": "square"}, "filter.loss_scale"),
    ("top_k", {"valeu": 0.5}, "unknown config key 'filter.valeu'"),
    ("dynamic", {"max_rounds": 0}, "filter.max_rounds: must be an integer >= 1"),
    ("dynamic", {"oversample": 0.5}, "filter.oversample"),
    ("none", {"metric": "loss"}, "filter.metric"),
])
def test_config_errors_name_the_field(filters, name: str, options: dict, message: str) -> None:  # noqa: ANN001
    with pytest.raises(ConfigError) as err:
        filters.get(name).make_config(options, path="filter")
    assert message in str(err.value)


def test_structure_directly_and_direct_construction() -> None:
    with pytest.raises(ConfigError, match=r"filter\.value: must be a number in \(0, 1\]: 3"):
        structure(TopPConfig, {"value": 3}, "filter")
    assert structure(TopPConfig, {"value": 0.5, "mode": "softmax"}, "filter") == TopPConfig(value=0.5, mode="softmax")
    with pytest.raises(ValueError, match="'value' must be a number in"):
        TopKConfig(value=float("nan"))
    with pytest.raises(ValueError, match="did you mean 'reward'"):
        TopPConfig(metric="rewards")
