#!/usr/bin/env bash
# A real GDPO training run on the CPU: verl's main_ppo (V1 trainer, Ray, TransferQueue, FSDP2 actor, vLLM
# CPU rollout server, weight sync) with this plugin's estimator, reward manager and math length-constrained
# rewards (two components: correct, length), on a tiny model and tokenizer built here and an 8-question
# fixture dataset, under tests/e2e/supervise.py, which stops the whole run (Ray and vLLM included) with a message
# when a part of it dies or a step stalls. Then tests/e2e/check_run.py reads what the run wrote and says whether
# it trained.
#
# Needs the environment of scripts/setup_cpu_training_env.sh; scripts/train_cpu.sh does both.
#
#   CPU_TRAINING_PYTHON=exe  the environment's interpreter (default $CPU_TRAINING_VENV/bin/python, where
#                            CPU_TRAINING_VENV defaults to .venv-cpu-training)
#   OUT=dir                  where the model, data, metrics, per-step records and checkpoint go
#                            (default outputs/cpu_training; the run's own subfolders in it are replaced)
#   STEPS=n                  training steps (default 2)
#   STALL_TIMEOUT=s          stop the run when no step finishes for s seconds (default 300; start-up and the
#                            first step take about 3 minutes on 2 cores, a later step seconds)
# Anything after the script name is passed to verl as extra hydra overrides.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PYTHON=${CPU_TRAINING_PYTHON:-${CPU_TRAINING_VENV:-$ROOT/.venv-cpu-training}/bin/python}
OUT=${OUT:-$ROOT/outputs/cpu_training}
STEPS=${STEPS:-2}
STALL_TIMEOUT=${STALL_TIMEOUT:-300}

if [ ! -x "$PYTHON" ]; then
    echo "run_cpu_training.sh: no interpreter at $PYTHON; create the environment with" \
         "bash scripts/setup_cpu_training_env.sh (or set CPU_TRAINING_PYTHON)." >&2
    exit 2
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
rm -rf "$OUT/model" "$OUT/data" "$OUT/checkpoints" "$OUT/gdpo" "$OUT/metrics.jsonl" "$OUT/run.log"

"$PYTHON" "$ROOT/tests/e2e/tiny_model.py" "$OUT/model"
"$PYTHON" "$ROOT/scripts/prepare_data.py" --out "$OUT/data" --local "deepscaler=$ROOT/tests/e2e/data/train.jsonl"

# The CPU platform for verl (tests/e2e/verl_cpu.py), loaded by verl itself in every process of the run.
export PYTHONPATH="$ROOT/tests/e2e${PYTHONPATH:+:$PYTHONPATH}"
export VERL_USE_EXTERNAL_MODULES=verl_cpu VERL_PLATFORM=cpu
# verl registers its FSDP engine for cuda/npu; this picks it, and it runs on the platform's device ("cpu").
export VERL_ENGINE_DEVICE=cuda
export VERL_FILE_LOGGER_PATH="$OUT/metrics.jsonl"
export TOKENIZERS_PARALLELISM=false
unset RAY_ADDRESS

TRAIN="$OUT/data/deepscaler_train.parquet"
ARGS=(
    --config-path pkg://gdpo_verl.config --config-name gdpo_trainer
    # GDPO on the paper's two math rewards; the per-step records feed check_run.py
    "algorithm.gdpo_reward_keys=[correct,length]"
    "algorithm.gdpo.dump_dir=$OUT/gdpo"
    "reward.custom_reward_function.path=pkg://gdpo_verl.rewards.math_length"
    "+reward.custom_reward_function.reward_kwargs.max_length=8"
    "+reward.custom_reward_function.reward_kwargs.think=none"
    # data: all 8 prompts x 4 responses of up to 16 tokens per step (8 groups: some reward varies in some group)
    "data.train_files=$TRAIN" "data.val_files=$TRAIN"
    data.train_batch_size=8 data.max_prompt_length=64 data.max_response_length=16
    data.dataloader_num_workers=0 data.filter_overlong_prompts_workers=1
    # actor: FSDP2 (FSDP1 asks for an accelerator device), SDPA attention, no torch.compile. A large learning
    # rate and no weight decay: every weight change comes from the GDPO policy gradient, and a weight sync
    # that did not reach vLLM shows in training/rollout_probs_diff_max.
    "actor_rollout_ref.model.path=$OUT/model"
    +actor_rollout_ref.model.override_config.attn_implementation=sdpa
    actor_rollout_ref.actor.strategy=fsdp2
    actor_rollout_ref.actor.use_torch_compile=False
    actor_rollout_ref.actor.ppo_mini_batch_size=8 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16
    actor_rollout_ref.actor.optim.lr=1e-2 actor_rollout_ref.actor.optim.weight_decay=0.0
    actor_rollout_ref.actor.use_kl_loss=False
    # rollout: vLLM's CPU build, eager, no sleep mode (CUDA only), a small share of memory for the KV cache
    actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.n=4
    actor_rollout_ref.rollout.tensor_model_parallel_size=1
    actor_rollout_ref.rollout.gpu_memory_utilization=0.1
    actor_rollout_ref.rollout.enforce_eager=True
    actor_rollout_ref.rollout.free_cache_engine=False +actor_rollout_ref.rollout.enable_sleep_mode=False
    actor_rollout_ref.rollout.max_model_len=128 actor_rollout_ref.rollout.max_num_batched_tokens=512
    actor_rollout_ref.rollout.max_num_seqs=32 actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16
    actor_rollout_ref.rollout.agent.num_workers=1
    # one placeholder "GPU" (verl's resource pools ask Ray for GPUs); a fresh local Ray (address=local: never a
    # cluster already running on this machine)
    trainer.nnodes=1 trainer.n_gpus_per_node=1 trainer.device=cpu
    "trainer.total_training_steps=$STEPS" "trainer.save_freq=$STEPS" trainer.resume_mode=disable
    trainer.val_before_train=False trainer.test_freq=-1
    "trainer.default_local_dir=$OUT/checkpoints"
    "trainer.logger=[console,file]" trainer.project_name=gdpo_cpu trainer.experiment_name=tiny
    transfer_queue.backend.SimpleStorage.num_data_storage_units=1
    +ray_kwargs.ray_init.address=local +ray_kwargs.ray_init.num_cpus=8 +ray_kwargs.ray_init.num_gpus=1
    +ray_kwargs.ray_init.include_dashboard=False
)
"$PYTHON" "$ROOT/tests/e2e/supervise.py" --log "$OUT/run.log" --metrics "$VERL_FILE_LOGGER_PATH" \
    --steps "$STEPS" --stall-timeout "$STALL_TIMEOUT" -- "$PYTHON" -m verl.trainer.main_ppo "${ARGS[@]}" "$@"
"$PYTHON" "$ROOT/tests/e2e/check_run.py" "$OUT" --steps "$STEPS"
