#!/usr/bin/env bash
# A few veRL StarPO steps on a small model, on a GPU machine with vLLM: prints throughput and success.
#
#   bash scripts/gpu_check.sh                    # 1 GPU, 3 steps, the built-in smollm2-135m (no download)
#   MODEL=/models/Qwen2.5-0.5B-Instruct STEPS=5 GPUS=2 bash scripts/gpu_check.sh
#   MODE=native bash scripts/gpu_check.sh        # the native trainer in bf16 on the GPU instead (no vLLM needed)
#
# Needs: an NVIDIA GPU; for MODE=verl (default) veRL 0.9.1 with vLLM (pip install -e '.[verl]' 'verl[vllm]==0.9.1'),
# which pulls a CUDA torch. Writes runs under ${OUT:-runs/gpu_check} and prints one summary line per run.
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=${MODE:-verl}
MODEL=${MODEL:-smollm2-135m}
STEPS=${STEPS:-3}
GPUS=${GPUS:-1}
OUT=${OUT:-runs/gpu_check}
PY=${PY:-python}

nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || { echo "gpu_check: no NVIDIA GPU visible" >&2; exit 2; }
$PY -c "import torch; assert torch.cuda.is_available(), 'torch has no CUDA'; print('torch', torch.__version__)"

# Small and fast: Sokoban, 4 groups x 8 trajectories, up to 3 turns of 64 tokens, GRPO (no critic).
COMMON=(env=sokoban rollout.env_groups=4 rollout.group_size=8 rollout.max_turn=3 rollout.max_new_tokens=64
        rollout.val_env_groups=4 rollout.val_group_size=2 estimator=grpo filter=top_p "run.output_dir=$OUT")

summary() {  # the last metrics line of the newest run: success, throughput, step time
  $PY - "$OUT" <<'EOF'
import json, pathlib, sys
runs = sorted(pathlib.Path(sys.argv[1]).glob("*/metrics.jsonl"), key=lambda p: p.stat().st_mtime)
if not runs:
    sys.exit("gpu_check: no metrics.jsonl written")
rows = [json.loads(l) for l in runs[-1].read_text().splitlines() if l.strip()]
steps = [r for r in rows if r.get("step", 0) > 0 and ("train/success" in r or "rollout/success" in r)]
last = steps[-1] if steps else rows[-1]
keys = ["train/success", "val/success", "rollout/reward_mean", "perf/tokens_per_s", "perf/throughput",
        "timing_s/step", "timing_s/gen"]
print("gpu_check:", runs[-1].parent.name, "step", last.get("step"),
      " ".join(f"{k}={last[k]:.4g}" for k in keys if isinstance(last.get(k), (int, float))))
EOF
}

if [ "$MODE" = native ]; then
  $PY -m ragen_core train "${COMMON[@]}" trainer=torch "trainer.model=$MODEL" trainer.dtype=bfloat16 \
      trainer.device=cuda "trainer.steps=$STEPS" trainer.mini_batch_size=32 trainer.micro_batch_size=16 \
      trainer.actor_lr=1e-5 trainer.val_every=0 trainer.save_every=0 "run.name=native-bf16"
  summary
  exit 0
fi

$PY -c "import verl, vllm; print('verl', verl.__version__, 'vllm', vllm.__version__)" \
  || { echo "gpu_check: MODE=verl needs veRL 0.9.1 and vLLM (pip install 'verl[vllm]==0.9.1')" >&2; exit 3; }
$PY -m ragen_core train "${COMMON[@]}" trainer=verl "trainer.model=$MODEL" "trainer.steps=$STEPS" \
    "trainer.n_gpus_per_node=$GPUS" trainer.nnodes=1 trainer.mini_batch_size=32 trainer.micro_batch_size=8 \
    trainer.max_prompt_length=1024 trainer.max_response_length=1024 trainer.gpu_memory_utilization=0.4 \
    trainer.val_every=0 trainer.save_every="$STEPS" trainer.actor_lr=1e-5 "run.name=verl-starpo"
summary
