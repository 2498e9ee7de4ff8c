"""veRL checkpoints → ragen's checkpoint layout and a Hugging Face folder that ``ragen eval`` loads.

veRL 0.9.1 writes ``<default_local_dir>/global_step_N/{actor,critic,data.pt}`` (its checkpoint manager; resumed with
``trainer.resume_mode``). ragen's layout is ``<run>/checkpoints/step_N/``: :func:`link_checkpoint` writes
``verl.json`` there pointing at veRL's folder (so ``ragen train --resume RUN_DIR`` finds it), and
:func:`export_hf` puts the actor as a Hugging Face folder at ``step_N/actor`` — copied from veRL's
``actor/huggingface`` when veRL saved full weights there, else merged from the FSDP shards with veRL's own
``verl.model_merger`` (``FSDPModelMerger``).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ragen_core.errors import RagenError

__all__ = ["export_hf", "latest_verl_step", "link_checkpoint", "verl_checkpoint_of"]

_WEIGHTS = ("*.safetensors", "pytorch_model*.bin")


def latest_verl_step(root: str | Path) -> Path | None:
    """The newest ``global_step_N`` folder under veRL's checkpoint root, or None."""
    steps = [p for p in Path(root).glob("global_step_*") if p.name.split("_")[-1].isdigit()]
    return max(steps, key=lambda p: int(p.name.split("_")[-1])) if steps else None


def _has_weights(folder: Path) -> bool:
    return folder.is_dir() and any(any(folder.glob(g)) for g in _WEIGHTS)


def export_hf(step_dir: str | Path, target: str | Path) -> Path:
    """Write the actor of veRL checkpoint ``step_dir`` (``global_step_N``) as a Hugging Face folder at ``target``."""
    step_dir, target = Path(step_dir), Path(target)
    actor = step_dir / "actor"
    if not actor.is_dir():
        raise RagenError(f"{str(step_dir)!r} is not a veRL checkpoint (no actor/ folder)")
    tmp = target.with_name(f".tmp_{target.name}")
    shutil.rmtree(tmp, ignore_errors=True)
    hf = actor / "huggingface"
    if _has_weights(hf):
        shutil.copytree(hf, tmp)
    else:
        if not (actor / "fsdp_config.json").exists():
            raise RagenError(f"cannot export {str(actor)!r}: neither huggingface/ weights nor FSDP shards "
                             "(fsdp_config.json) are there")
        from verl.model_merger.base_model_merger import ModelMergerConfig
        from verl.model_merger.fsdp_model_merger import FSDPModelMerger

        tmp.mkdir(parents=True)
        merger = FSDPModelMerger(ModelMergerConfig(operation="merge", backend="fsdp", local_dir=os.fspath(actor),
                                                   target_dir=os.fspath(tmp), hf_model_config_path=os.fspath(hf)))
        merger.merge_and_save()
        merger.cleanup()
        for name in os.listdir(hf) if hf.is_dir() else []:  # tokenizer files next to the weights
            if not (tmp / name).exists() and (hf / name).is_file():
                shutil.copy2(hf / name, tmp / name)
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, target)
    return target


def link_checkpoint(run_dir: str | Path, verl_step: str | Path) -> Path:
    """``<run>/checkpoints/step_N/verl.json`` pointing at veRL's ``global_step_N``."""
    verl_step = Path(verl_step)
    step = int(verl_step.name.split("_")[-1])
    folder = Path(run_dir) / "checkpoints" / f"step_{step:06d}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "verl.json").write_text(json.dumps({"verl_checkpoint": os.fspath(verl_step.resolve()), "step": step}))
    return folder


def verl_checkpoint_of(ragen_checkpoint: str | Path) -> Path | None:
    """The veRL ``global_step_N`` a ragen checkpoint folder points at, or None (e.g. a native trainer's)."""
    path = Path(ragen_checkpoint) / "verl.json"
    if not path.exists():
        return None
    return Path(json.loads(path.read_text())["verl_checkpoint"])
