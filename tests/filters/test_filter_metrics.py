"""The filter metrics docs/metrics.md promises for every filter: whoever calls a filter applies
:func:`ragen_core.registry.with_filter_metrics` to its selection, so a third party's filter reports the in-group
reward statistics (and kept counts) exactly as the built-ins compute them, and the built-ins' values do not change."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragen_core import hookimpl
from ragen_core.data import RolloutBatch, random_batch
from ragen_core.protocols import FilterResult
from ragen_core.registry import with_filter_metrics
from ragen_plugins_filters.config import TopKConfig, TopPConfig
from ragen_plugins_filters.filters import TopKFilter, TopPFilter
from tests.filters import reference as ref
from tests.filters.helpers import batch_of, traj
from tests.filters.test_properties import batches, top_k_options, top_p_options

IN_GROUP = [f"rollout/{chosen}in_group_reward_{stat}" for chosen in ("", "chosen_") for stat in ("std", "max", "mean")]
#: the keys whose meaning does not depend on how a filter ranks groups
COMMON = [*IN_GROUP, "rollout/filter_kept_count", "rollout/filter_kept_ratio", "rollout/filter_failed_groups"]


class EveryOther:
    """A third party's filter, as docs/plugins.md shows one: it keeps every other group and reports no metrics."""

    def __init__(self, config: Any = None) -> None:
        self.config = config

    def select(self, batch: RolloutBatch) -> FilterResult:
        return FilterResult(tuple(batch.group_ids()[::2]))


class Plugin:
    @hookimpl
    def ragen_register_filters(self, registry: Any) -> None:
        registry.register("every_other", EveryOther, description="every other group")


def built_in(name: str, opts: dict[str, Any]) -> Any:
    return TopPFilter(TopPConfig(**opts)) if name == "top_p" else TopKFilter(TopKConfig(**opts))


@pytest.mark.parametrize("name", ["top_p", "top_k"])
def test_the_built_ins_report_the_same_numbers_before_and_after(name: str) -> None:
    @settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(seed=st.integers(0, 2**20), batch=batches(),
           opts=top_p_options() if name == "top_p" else top_k_options())
    def check(seed: int, batch: RolloutBatch, opts: dict[str, Any]) -> None:
        for b in (random_batch(seed), batch):
            before = built_in(name, opts).select(b)
            after = with_filter_metrics(b, built_in(name, opts).select(b))
            assert after.metrics == before.metrics and list(after.metrics) == list(before.metrics)
            assert after.kept_groups == before.kept_groups
            # the shared computation alone, on the same kept groups, gives the built-in's numbers exactly
            alone = with_filter_metrics(b, FilterResult(before.kept_groups)).metrics
            assert {k: alone[k] for k in COMMON} == {k: before.metrics[k] for k in COMMON}

    check()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=batches())
def test_a_custom_filter_gets_what_the_reference_computes(batch: RolloutBatch) -> None:
    result = with_filter_metrics(batch, EveryOther().select(batch))
    want = ref.ref_metrics(batch, list(result.kept_groups), "reward_variance")
    assert {k: result.metrics[k] for k in COMMON} == pytest.approx({k: want[k] for k in COMMON}, rel=1e-9, abs=1e-12)
    assert result.metrics["rollout/filter_loss_scale"] == 1.0  # what the trainers use when a filter names none
    assert "rollout/filter_zero_count" not in result.metrics  # ranking-specific: only a filter can say


def test_a_registered_custom_filter_reports_the_statistics(ragen_register, ragen_registries) -> None:  # noqa: ANN001
    ragen_register(Plugin(), name="third_party")
    filt = ragen_registries().filters.get("every_other").create()
    batch = batch_of([[-9.0, 0.0, 9.0], [-5.0, 0.0, 5.0], [-1.0, 0.0, 1.0]])
    metrics = with_filter_metrics(batch, filt.select(batch)).metrics
    assert metrics["rollout/in_group_reward_std"] == pytest.approx(5.0)  # mean of the stds 9, 5, 1
    assert metrics["rollout/chosen_in_group_reward_std"] == pytest.approx(5.0)  # groups 0 and 2: (9 + 1) / 2
    assert metrics["rollout/in_group_reward_max"] == pytest.approx(5.0) and metrics["rollout/in_group_reward_mean"] == 0
    assert metrics["rollout/filter_kept_count"] == 2 and metrics["rollout/filter_kept_ratio"] == pytest.approx(2 / 3)


def test_failed_trajectories_and_groups_are_left_out() -> None:
    batch = RolloutBatch([traj(7, 1.0), traj(7, 3.0), traj(7, 100.0, error="boom"), traj(8, 5.0, error="boom")])
    metrics = with_filter_metrics(batch, FilterResult((7, 8))).metrics
    assert metrics["rollout/in_group_reward_mean"] == 2.0 and metrics["rollout/in_group_reward_max"] == 3.0
    assert metrics["rollout/chosen_in_group_reward_mean"] == 2.0 and metrics["rollout/filter_failed_groups"] == 1
    empty = with_filter_metrics(batch, FilterResult(())).metrics
    assert empty["rollout/chosen_in_group_reward_std"] == 0.0 and empty["rollout/filter_kept_ratio"] == 0.0


def test_a_filters_own_values_win() -> None:
    batch = batch_of([[0.0, 1.0]])
    result = with_filter_metrics(batch, FilterResult((0,), {"rollout/in_group_reward_std": 42.0, "mine": 1.0}))
    assert result.metrics["rollout/in_group_reward_std"] == 42.0 and result.metrics["mine"] == 1.0
    assert result.metrics["rollout/in_group_reward_max"] == 1.0


def test_the_torch_trainer_reports_them_for_a_custom_filter() -> None:
    trainer = pytest.importorskip("ragen_plugins_torch.trainer")
    batch = batch_of([[-9.0, 0.0, 9.0], [-5.0, 0.0, 5.0], [-1.0, 0.0, 1.0]])
    metrics: dict[str, float] = {}
    kept, scale = trainer.TorchTrainer._apply_filter(SimpleNamespace(filter=EveryOther()), None, 1, batch, metrics)
    assert kept.group_ids() == [0, 2] and scale == 1.0
    assert metrics["rollout/chosen_in_group_reward_std"] == pytest.approx(5.0) and set(IN_GROUP) <= set(metrics)
