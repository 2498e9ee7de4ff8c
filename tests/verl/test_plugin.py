"""The ``verl`` trainer spec, its config class and the refusals — none of this needs veRL installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragen_core.config import load_config, resolve_config
from ragen_core.errors import ConfigError
from ragen_core.plugins import build_plugin_manager, collect_registries
from ragen_plugins_verl import INSTALL_HINT
from ragen_plugins_verl.config import VerlTrainerConfig, check_resources, unsupported

ROOT = Path(__file__).resolve().parents[2]


def resolved(*overrides: str, strict: bool = True):
    config = load_config(None, ["env=sokoban", "trainer=verl", "rollout.group_size=4", "rollout.env_groups=4",
                                "trainer.mini_batch_size=8", *overrides])
    pm = build_plugin_manager(config)
    regs = collect_registries(pm)
    return resolve_config(config, regs, pm, strict=strict), regs


def test_spec_is_registered_lazily_with_install_hint_and_preset() -> None:
    regs = collect_registries(build_plugin_manager())
    spec = regs.trainers.get("verl")
    assert spec.entry_point == "ragen_plugins_verl.trainer:VerlTrainer"
    assert "[verl]" in spec.install_hint and spec.install_hint == INSTALL_HINT
    preset = load_config(spec.preset_path())
    assert preset.trainer.name == "verl" and preset.estimator.name == "gae"


def test_registering_imports_neither_verl_nor_torch() -> None:
    code = ("import sys; from ragen_core.plugins import build_plugin_manager, collect_registries;"
            "r = collect_registries(build_plugin_manager()); r.trainers.get('verl').config_class();"
            "print([m for m in ('verl', 'torch', 'ray') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_config_defaults_match_the_native_trainer_where_shared() -> None:
    from ragen_plugins_torch.trainer import TorchTrainerConfig

    ours, native = VerlTrainerConfig(), TorchTrainerConfig()
    for key in ("actor_lr", "critic_lr", "ppo_epochs", "mini_batch_size", "clip_low", "clip_high", "dual_clip",
                "entropy_coeff", "use_kl_loss", "kl_coeff", "kl_estimator", "loss_agg", "grad_clip", "value_clip"):
        assert getattr(ours, key) == getattr(native, key), key


def test_bad_options_are_config_errors_with_the_key() -> None:
    with pytest.raises(ConfigError, match="trainer.n_gpus_per_node"):
        resolved("trainer.n_gpus_per_node=0")
    with pytest.raises(ConfigError, match="dual_clip"):
        resolved("trainer.dual_clip=0.5")
    with pytest.raises(ConfigError, match="rollout_backend"):
        resolved("trainer.rollout_backend=trtllm")


@pytest.mark.parametrize("override, reason", [
    ("rollout.context_mode=single_turn", "context_mode"),
    ("rollout.max_context_tokens=512", "max_context_tokens"),
    ("filter=dynamic", "filter=dynamic"),
    ("trainer.mini_batch_size=6", "multiple of rollout.group_size"),
    ("trainer.mini_batch_size=40", "exceeds"),
    ("trainer.dual_clip=null", "dual_clip=null"),
    ("trainer.max_response_length=100", "max_response_length"),
    ("trainer.tensor_parallel_size=2", "tensor_parallel_size"),
    ("trainer.n_gpus_per_node=3", "split evenly"),
])
def test_unsupported_combinations_are_refused_with_the_reason(override: str, reason: str) -> None:
    with pytest.raises(ConfigError, match="config check failed") as info:
        resolved(override)
    assert reason in str(info.value)


def test_a_supported_config_has_no_problems() -> None:
    res, regs = resolved("estimator=gae", "filter=top_p")
    assert unsupported(res, regs) == []


def test_critic_estimator_needs_value_clip() -> None:
    with pytest.raises(ConfigError, match="value_clip"):
        resolved("estimator=gae", "trainer.value_clip=null")


def test_more_gpus_than_visible_is_an_error_before_anything_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=r"n_gpus_per_node=2 but this node sees 1 GPU") as info:
        check_resources(VerlTrainerConfig(n_gpus_per_node=2), visible=1)
    assert "trainer=torch" in (info.value.hint or "")
    check_resources(VerlTrainerConfig(n_gpus_per_node=2), visible=2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(ConfigError, match="sees 0 GPU"):
        check_resources(VerlTrainerConfig(n_gpus_per_node=1))


def test_train_without_verl_says_how_to_install(tmp_path: Path) -> None:
    """``ragen train trainer=verl`` in a Python where ``import verl`` fails prints the extra to install."""
    code = ("import sys; sys.modules['verl'] = None\n"
            "from ragen_core.cli import main\n"
            f"main(['train', 'trainer=verl', 'run.output_dir={tmp_path}'])\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "RAGEN_DISABLE_PLUGINS": ""}, timeout=300)
    out = res.stdout + res.stderr
    assert res.returncode != 0
    assert "needs packages that are not installed" in out and "'ragen[verl]'" in out, out[-2000:]
