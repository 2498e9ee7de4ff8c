"""The parts that run inside veRL 0.9.1's processes, exercised on CPU: the translated config through veRL's own
validation, the agent loop against a fake generation server, the trainer mode's advantage step, the diagnostics'
scorer adapter and the checkpoint export."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from ragen_core.config import load_config, resolve_config
from ragen_core.errors import ConfigError
from ragen_core.plugins import build_plugin_manager, collect_registries
from ragen_core.starpo.batching import advantage_input, build_samples, normalise_scores

from .conftest import require_verl, rollout

require_verl()

import torch  # noqa: E402

from ragen_plugins_verl.advantages import compute_advantages, prepare_dataproto  # noqa: E402
from ragen_plugins_verl.agent_loop import finish_reason, load_trajectory, trajectory_output  # noqa: E402
from ragen_plugins_verl.config import build_verl_config, validate_verl_config, verl_settings  # noqa: E402
from ragen_plugins_verl.dataproto import _objects, prompt_split  # noqa: E402


def run_for(tmp_path: Path, *overrides: str):
    config = load_config(None, ["env=sokoban", "trainer=verl", "rollout.env_groups=4", "rollout.group_size=4",
                                "trainer.mini_batch_size=8", f"run.output_dir={tmp_path}", *overrides])
    pm = build_plugin_manager(config)
    regs = collect_registries(pm)
    res = resolve_config(config, regs, pm)
    return SimpleNamespace(resolved=res, registries=regs, config=res.config, run_dir=tmp_path, state={})


@pytest.fixture(scope="module")
def tiny_model() -> str:
    from ragen_plugins_torch.models import build_tiny_model

    return str(build_tiny_model())


# ------------------------------------------------------------------------------------------------ config

@pytest.mark.parametrize("estimator", ["grpo", "gae"])
def test_translated_config_passes_verls_validation(tmp_path: Path, tiny_model: str, estimator: str) -> None:
    run = run_for(tmp_path, f"estimator={estimator}", "trainer.n_gpus_per_node=2", "trainer.nnodes=2")
    needs = estimator == "gae"
    settings = verl_settings(run.resolved, tmp_path, model_path=tiny_model, needs_critic=needs)
    cfg = build_verl_config(settings, {"config": run.resolved.to_data(), "run_dir": str(tmp_path)})
    validate_verl_config(cfg)
    ar = cfg.actor_rollout_ref
    assert ar.rollout.n == 4 and cfg.data.train_batch_size == 4 and ar.actor.ppo_mini_batch_size == 2
    assert cfg.trainer.n_gpus_per_node == 2 and cfg.trainer.nnodes == 2 and cfg.trainer.v1.trainer_mode == "ragen"
    assert ar.actor.clip_ratio_low == 0.2 and ar.actor.clip_ratio_high == 0.28 and ar.actor.clip_ratio_c == 3.0
    assert cfg.critic.enable is needs
    assert cfg.algorithm.adv_estimator == ("gae" if needs else "ragen_grpo")
    assert cfg.ragen.config["estimator"]["name"] == estimator
    from verl.trainer.ppo.utils import need_critic
    from verl.utils.config import omega_conf_to_dataclass

    assert need_critic(cfg) is needs
    actor = omega_conf_to_dataclass(ar.actor)  # veRL's dataclass accepts every translated actor key
    assert actor.entropy_coeff == pytest.approx(0.001) and actor.loss_agg_mode == "token-mean"


def test_every_mapped_key_exists_in_verls_schema(tmp_path: Path) -> None:
    from omegaconf import OmegaConf

    run = run_for(tmp_path)
    settings = verl_settings(run.resolved, tmp_path, needs_critic=True)
    cfg = build_verl_config(settings)
    for key, value in settings.items():
        got = OmegaConf.select(cfg, key)
        assert (list(got) if OmegaConf.is_list(got) else got) == value, key


def test_lr_warmup_is_verls_and_off_is_verls_off(tmp_path: Path) -> None:
    key = "actor_rollout_ref.actor.optim.lr_warmup_steps"
    assert verl_settings(run_for(tmp_path).resolved, tmp_path)[key] == -1  # veRL's "none" (then its ratio, 0)
    on = verl_settings(run_for(tmp_path, "trainer.lr_warmup_steps=5").resolved, tmp_path)
    assert on[key] == 5 and build_verl_config(on).actor_rollout_ref.actor.optim.lr_warmup_steps == 5


def test_verl_rejections_become_config_errors(tmp_path: Path, tiny_model: str) -> None:
    run = run_for(tmp_path)
    settings = verl_settings(run.resolved, tmp_path, model_path=tiny_model)
    cfg = build_verl_config(settings, overrides=["actor_rollout_ref.actor.ppo_mini_batch_size=64"])
    with pytest.raises(ConfigError, match="veRL rejected the translated config"):
        validate_verl_config(cfg)
    with pytest.raises(ConfigError, match="no key"):
        build_verl_config(settings, overrides=["actor_rollout_ref.actor.no_such_key=1"])
    with pytest.raises(ConfigError, match="no key 'trainer.nope'"):
        build_verl_config({**settings, "trainer.nope": 1})


def test_prepare_checks_gpus_before_composing_anything(tmp_path: Path) -> None:
    from ragen_plugins_verl.trainer import prepare

    run = run_for(tmp_path, "trainer.n_gpus_per_node=4")
    with pytest.raises(ConfigError, match="n_gpus_per_node=4 but this node sees 0"):
        prepare(run, run.resolved.trainer, visible_gpus=0)
    assert not (tmp_path / "verl").exists()


def test_prepare_writes_a_validated_config_and_the_group_rows(tmp_path: Path, tiny_model: str) -> None:
    from ragen_plugins_verl.dataset import EnvGroupDataset
    from ragen_plugins_verl.trainer import prepare

    run = run_for(tmp_path, f"trainer.model={tiny_model}", "trainer.steps=3", "rollout.seed_train=100")
    cfg = prepare(run, run.resolved.trainer, visible_gpus=1)
    assert (tmp_path / "verl" / "verl_config.yaml").exists()
    train = EnvGroupDataset(cfg.data.train_files)
    assert len(train) == 3 * 4
    assert [r["ragen_seed"] for r in train.rows[4:8]] == [104, 105, 106, 107]  # step 2: seed_train + 4 + g
    val = EnvGroupDataset(cfg.data.val_files)
    assert [r["ragen_seed"] for r in val.rows] == [123 + i for i in range(len(val))]
    assert {r["agent_name"] for r in train.rows} == {"ragen"}
    loops = Path(cfg.actor_rollout_ref.rollout.agent.agent_loop_config_path)  # veRL's workers read it
    assert loops == tmp_path / "verl" / "agent_loops.yaml"
    assert "_target_: ragen_plugins_verl.agent_loop.RagenAgentLoop" in loops.read_text()


# ------------------------------------------------------------------------------------------------ agent loop

class FakeServer:
    """veRL's LLM server client, answering from a scripted policy in the tokenizer's ids."""

    def __init__(self, tokenizer, answer: str = "I will go.</think><answer>Up || Left</answer>") -> None:
        self.ids = tokenizer.encode(answer, add_special_tokens=False)
        self.calls = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
        self.calls.append((request_id, list(prompt_ids), dict(sampling_params)))
        n = min(len(self.ids), sampling_params["max_tokens"])
        return SimpleNamespace(token_ids=self.ids[:n], log_probs=[-0.5] * n, stop_reason="completed")


def make_loop(tokenizer, server, ragen_data):
    from omegaconf import OmegaConf

    from ragen_plugins_verl.agent_loop import RagenAgentLoop

    loop = RagenAgentLoop.__new__(RagenAgentLoop)  # veRL's __init__ builds its token builder from a worker config
    loop.config = OmegaConf.create({"ragen": {"config": ragen_data}})
    loop.server_manager, loop.tokenizer = server, tokenizer
    return loop


@pytest.mark.parametrize("use_turn_scores", [False, True])
def test_agent_loop_runs_the_core_episode_against_a_generation_server(tmp_path: Path, tiny_model: str,
                                                                      use_turn_scores: bool) -> None:
    from transformers import AutoTokenizer
    from verl.experimental.agent_loop import AgentLoopOutput

    tok = AutoTokenizer.from_pretrained(tiny_model)
    run = run_for(tmp_path, f"rollout.use_turn_scores={str(use_turn_scores).lower()}", "rollout.max_turn=3")
    server = FakeServer(tok)
    loop = make_loop(tok, server, run.resolved.to_data())
    row = {"ragen_env": "sokoban", "ragen_options": "{}", "ragen_seed": 7, "ragen_group": 3, "session_id": 1}
    out = asyncio.run(loop.run({"temperature": 1.0, "top_p": 1.0, "top_k": -1, "logprobs": True}, **row))
    assert isinstance(out, AgentLoopOutput)
    traj = load_trajectory(out.extra_fields["ragen_trajectory"])
    assert traj.seed == 7 and traj.group_id == 3 and traj.env == "sokoban" and 1 <= len(traj.turns) <= 3
    seq = [i for t in traj.turns for i in (*t.prompt_ids, *t.response_ids)]
    assert out.prompt_ids + out.response_ids == seq  # token-exact, the sampled ids themselves
    assert sum(out.response_mask) == sum(len(t.response_ids) for t in traj.turns)
    assert out.response_logprobs == [(-0.5 if m else 0.0) for m in out.response_mask]
    assert out.reward_score == pytest.approx(traj.score)
    assert len(server.calls) == len(traj.turns) and len({c[0] for c in server.calls}) == 1  # one sticky id
    params = server.calls[0][2]
    assert params["stop"] == ["</answer>"] and params["include_stop_str_in_output"] and params["logprobs"]
    assert params["max_tokens"] == run.config.rollout.max_new_tokens
    assert out.response_ids[-1] == server.ids[-1]  # the score lands on the last generated token
    assert "success" in out.extra_fields["reward_extra_info"]


def test_finish_reason_from_verl_token_outputs() -> None:
    """veRL 0.9.1's vLLM server says ``completed`` for a stop and for the token limit alike; its retry loop and
    SGLang say ``length``: a response that used the whole budget, or a ``length``, is the core's ``length``."""
    assert finish_reason("completed", 5, 5) == "length"
    assert finish_reason("completed", 3, 5) == "stop"
    assert finish_reason("length", 3, 5) == "length"
    assert finish_reason({"type": "length", "length": 5}, 5, 5) == "length"
    assert finish_reason(None, 0, 5) == "stop" and finish_reason("aborted", 2, 5) == "stop"


def test_the_agent_loop_marks_answers_cut_by_the_budget(tmp_path: Path, tiny_model: str) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    server = FakeServer(tok)
    for budget, cut in ((4, True), (len(server.ids), False)):  # cut at 4 tokens; the whole answer fits exactly
        run = run_for(tmp_path, f"rollout.max_new_tokens={budget}", "rollout.max_turn=2")
        loop = make_loop(tok, server, run.resolved.to_data())
        row = {"ragen_env": "sokoban", "ragen_options": "{}", "ragen_seed": 7, "ragen_group": 0}
        out = asyncio.run(loop.run({"temperature": 1.0}, **row))
        traj = load_trajectory(out.extra_fields["ragen_trajectory"])
        assert traj.turns and all(t.truncated == cut for t in traj.turns), budget


def test_a_failing_env_costs_its_episode_only(tmp_path: Path, tiny_model: str) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    run = run_for(tmp_path)
    loop = make_loop(tok, FakeServer(tok), run.resolved.to_data())
    row = {"ragen_env": "sokoban", "ragen_options": json.dumps({"dim_room": "bad"}), "ragen_seed": 1,
           "ragen_group": 0}
    out = asyncio.run(loop.run({"temperature": 1.0}, **row))
    assert out.response_mask == [0] and out.reward_score == 0.0
    assert load_trajectory(out.extra_fields["ragen_trajectory"]).env_error


# ------------------------------------------------------------------------------------------------ trainer step

def verl_rows(batch, use_turn_scores: bool):
    """What the trainer mode's ``_compute_advantage`` sees: veRL's padded rows with the agent loop's outputs,
    plus one veRL padding row."""
    from verl import DataProto

    outs = [trajectory_output(t, use_turn_scores=use_turn_scores) for t in batch]
    r = max(len(o["response_ids"]) for o in outs)
    b = len(outs) + 1
    mask = torch.zeros((b, r), dtype=torch.long)
    rm = torch.zeros((b, r))
    for i, o in enumerate(outs):
        n = len(o["response_ids"])
        mask[i, :n] = torch.tensor(o["response_mask"])
        rm[i, n - 1] = o["reward_score"]  # AgentLoopOutput.as_dict: rm_scores[-1] = reward_score
    mask[-1, 0] = 0
    data = DataProto.from_dict(tensors={"response_mask": mask, "rm_scores": rm, "responses": torch.zeros_like(mask)},
                               non_tensors={"uid": _objects([f"g{t.group_id}" for t in batch] + ["padabc"])})
    extras = [o["extra_fields"] for o in outs] + [dict(outs[0]["extra_fields"])]
    return data, extras, outs


@pytest.mark.parametrize("name", ["grpo", "gae", "gigpo", "rloo", "bilevel_gae"])
@pytest.mark.parametrize("use_turn_scores, norm", [(False, "identity"), (False, "mean_std"), (True, "identity")])
def test_trainer_mode_advantages_equal_the_native_trainers(registries, name: str, use_turn_scores: bool,
                                                           norm: str) -> None:
    batch = rollout(registries, groups=3, group_size=4, seed=13, use_turn_scores=use_turn_scores)
    for i, t in enumerate(batch):
        t.score = float(i % 4) - 1.0
        for turn in t.turns:
            turn.reward = float(i % 3) * 0.5
    data, extras, _outs = verl_rows(batch, use_turn_scores)
    prepare_dataproto(data, extras)
    est = registries.estimators.get(name).create()
    # the native trainer: normalise scores, build samples, estimate over the whole sequence
    samples = build_samples(batch, normalise_scores(batch, norm, "group"), use_turn_scores=use_turn_scores)
    width = max(len(s.input_ids) for s in samples)
    values = np.random.default_rng(0).normal(size=(len(samples), width)) if est.needs_critic else None
    core = est.compute(advantage_input(samples, values=values))
    r = data.batch["response_mask"].shape[1]
    if values is not None:
        v = np.zeros((len(data), r))
        for i, s in enumerate(samples):
            k = prompt_split(s)
            v[i, :len(s.input_ids) - k] = values[i, k:len(s.input_ids)]
        data.batch["values"] = torch.tensor(v)
    compute_advantages(data, est, reward_norm=norm, reward_norm_by="group", use_turn_scores=use_turn_scores)
    adv = data.batch["advantages"].numpy()
    for i, s in enumerate(samples):
        k = prompt_split(s)
        n = len(s.input_ids) - k
        np.testing.assert_allclose(adv[i, :n], np.asarray(core.advantages)[i, k:k + n], atol=1e-5)
    assert (adv[-1] == 0).all()  # veRL's padding row trains nothing


def test_empty_selection_zeroes_the_advantages(registries) -> None:
    batch = rollout(registries, groups=2, group_size=3, seed=1)
    for i, t in enumerate(batch):
        t.score = float(i)
    data, extras, _ = verl_rows(batch, False)
    prepare_dataproto(data, extras)
    compute_advantages(data, registries.estimators.get("grpo").create(), scale=0.0)
    assert float(data.batch["advantages"].abs().sum()) == 0.0


# ------------------------------------------------------------------------------------------------ scorer, export

def test_actor_scorer_matches_the_native_scorer(tiny_model: str) -> None:
    from ragen_plugins_torch.models import load_model_and_tokenizer
    from ragen_plugins_torch.policy import HFPolicy
    from ragen_plugins_verl.verl_trainer import ActorScorer

    model, tok = load_model_and_tokenizer(tiny_model)
    policy = HFPolicy(model, tok, device="cpu")

    def logprob_fn(prompts, continuations):  # the actor's response log-probs, right-padded as veRL returns them
        return [row + [99.0] * 3 for row in policy.score(prompts, continuations)]

    scorer = ActorScorer(tok, logprob_fn)
    prompts = [tok.encode("State: #P_O#"), tok.encode("Turn 2")]
    conts = [tok.encode(" go up</think>"), tok.encode(" left")]
    got, want = scorer.score(prompts, conts, batch_size=1), policy.score(prompts, conts)
    assert [len(r) for r in got] == [len(c) for c in conts]
    np.testing.assert_allclose(sum(got, []), sum(want, []), atol=1e-6)


def test_export_merges_fsdp_shards_into_a_loadable_folder(tmp_path: Path, tiny_model: str) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ragen_plugins_verl.export import export_hf, latest_verl_step, link_checkpoint, verl_checkpoint_of

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    actor = tmp_path / "verl" / "global_step_3" / "actor"
    (actor / "huggingface").mkdir(parents=True)
    (tmp_path / "verl" / "global_step_1" / "actor").mkdir(parents=True)
    model.config.save_pretrained(actor / "huggingface")
    AutoTokenizer.from_pretrained(tiny_model).save_pretrained(actor / "huggingface")
    torch.save({k: v.clone() for k, v in model.state_dict().items()}, actor / "model_world_size_1_rank_0.pt")
    (actor / "fsdp_config.json").write_text(json.dumps({"world_size": 1}))
    last = latest_verl_step(tmp_path / "verl")
    assert last.name == "global_step_3"
    folder = link_checkpoint(tmp_path / "run", last)
    assert folder.name == "step_000003" and verl_checkpoint_of(folder) == last.resolve()
    out = export_hf(last, folder / "actor")
    again = AutoModelForCausalLM.from_pretrained(out)
    merged = again.state_dict()
    for key, value in model.state_dict().items():  # veRL's merger stores the dtype it was configured with
        assert torch.equal(merged[key], value.to(merged[key].dtype)), key
    AutoTokenizer.from_pretrained(out)  # ragen eval loads model and tokenizer from the folder
