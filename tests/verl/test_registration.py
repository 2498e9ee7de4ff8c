"""ragen registers nothing in veRL at import: each piece is registered on first use, in the process that needs it."""

from __future__ import annotations

import ast
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verl")

import ragen_plugins_verl  # noqa: E402
from ragen_core.errors import RagenError  # noqa: E402

OPT_IN = "ragen_plugins_verl.verl_estimators"  # the one module whose import registers, for plain veRL runs


def _python(code: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("VERL_USE_EXTERNAL")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**clean, **env},
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()[-1]


REGISTERED = ("from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY as A;"
              "from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY as T;"
              "from verl.experimental.agent_loop.agent_loop import _agent_loop_registry as L;"
              "print(sorted(k for k in A if k.startswith('ragen')), 'ragen' in T, 'ragen' in L)")


def test_import_verl_loads_no_ragen_module_and_registers_nothing() -> None:
    out = _python("import sys, verl;" + REGISTERED[:-1]
                  + ", sorted(m for m in sys.modules if m.startswith('ragen')))")
    assert out == "[] False False []"


def test_importing_every_module_of_the_verl_plugin_registers_nothing() -> None:
    names = [m.name for m in pkgutil.walk_packages(ragen_plugins_verl.__path__, "ragen_plugins_verl.")
             if m.name != OPT_IN]
    assert {"ragen_plugins_verl.verl_plugin", "ragen_plugins_verl.task_runner",
            "ragen_plugins_verl.verl_trainer", "ragen_plugins_verl.agent_loop"} <= set(names)
    out = _python(f"import importlib; [importlib.import_module(m) for m in {names!r}];"
                  + REGISTERED)
    assert out == "[] False False"


def test_plain_verl_opts_in_to_the_estimators_with_verls_own_switch() -> None:
    out = _python("import verl;" + REGISTERED, VERL_USE_EXTERNAL_MODULES=OPT_IN)
    names, trainer, loop = out.rsplit(" ", 2)
    assert ast.literal_eval(names) == ["ragen_drgrpo", "ragen_grpo", "ragen_reinforce_pp",
                           "ragen_reinforce_pp_baseline", "ragen_rloo"]
    assert (trainer, loop) == ("False", "False")


def test_the_trainer_mode_is_registered_on_first_use_idempotently() -> None:
    from verl.trainer.ppo.v1 import get_trainer_cls
    from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY

    from ragen_plugins_verl.verl_plugin import check_trainer_mode, register_trainer_mode
    from ragen_plugins_verl.verl_trainer import RagenPPOTrainer

    saved = TRAINER_REGISTRY.pop("ragen", None)
    try:
        check_trainer_mode()
        assert get_trainer_cls("ragen") is RagenPPOTrainer
        assert register_trainer_mode() is RagenPPOTrainer  # a second call changes nothing
        TRAINER_REGISTRY["ragen"] = TRAINER_REGISTRY["sync"]  # another package took the name
        with pytest.raises(RagenError, match="already registered") as err:
            check_trainer_mode()
        assert "cannot be registered" in str(err.value)
    finally:
        TRAINER_REGISTRY.pop("ragen", None)
        if saved is not None:
            TRAINER_REGISTRY["ragen"] = saved


def test_the_agent_loop_yaml_names_a_class_veRL_can_instantiate(tmp_path: Path) -> None:
    from hydra.utils import get_class
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase

    from ragen_plugins_verl.agent_loop import RagenAgentLoop
    from ragen_plugins_verl.config import AGENT_LOOP
    from ragen_plugins_verl.verl_plugin import agent_loop_yaml

    path = agent_loop_yaml(tmp_path / "verl" / "agent_loops.yaml")
    entries = OmegaConf.load(path)  # what veRL's AgentLoopWorker does with rollout.agent.agent_loop_config_path
    assert [e.name for e in entries] == [AGENT_LOOP]
    cls = get_class(entries[0]["_target_"])
    assert cls is RagenAgentLoop and issubclass(cls, AgentLoopBase)


def test_ragens_task_runner_registers_the_mode_inside_its_own_ray_process() -> None:
    """The actor veRL's ``run_ppo`` starts: in a fresh Ray worker process, ``register`` makes the mode resolvable
    (``run`` calls it before veRL's own ``run``)."""
    out = _python(
        "import ray; ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False);"
        "from ragen_plugins_verl.task_runner import task_runner_class;"
        "a = task_runner_class().remote(); print(ray.get(a.register.remote(), timeout=240)); ray.shutdown()")
    assert out == "ragen_plugins_verl.verl_trainer.RagenPPOTrainer"
