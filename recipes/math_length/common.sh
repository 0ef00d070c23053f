#!/usr/bin/env bash
# Shared settings of the math length-constrained experiments (arXiv 2601.05242, section 4.2), sourced by
# every script in this folder. A script sets MODEL, ESTIMATOR (grpo|gdpo), CONDITIONED (False|True) and
# EXPERIMENT, sources this file, and calls run_recipe "$@". Every knob below is an environment variable
# with the paper's value as default; extra arguments are passed to verl as hydra overrides.
# DRY_RUN=1 prints the fully composed config (verl's --cfg job) and exits: no Ray, no GPU.
set -euo pipefail

: "${MODEL:?the script must set MODEL}"
: "${ESTIMATOR:?the script must set ESTIMATOR (grpo or gdpo)}"
: "${EXPERIMENT:?the script must set EXPERIMENT}"
CONDITIONED=${CONDITIONED:-False}      # True: length pays only correct answers (the paper's conditioned reward)
THINK=${THINK:-required}               # required: answer after </think> (R1 distills); none: answer directly

# Data (scripts/prepare_data.py writes these)
DATA_DIR=${DATA_DIR:-$HOME/data/math_length}
TRAIN_FILE=${TRAIN_FILE:-$DATA_DIR/deepscaler_train.parquet}
VAL_FILES=${VAL_FILES:-[$DATA_DIR/aime24.parquet,$DATA_DIR/math500.parquet]}
TRAIN_BATCH_SIZE=${TRAIN_BATCH_SIZE:-512}
MAX_PROMPT_LENGTH=${MAX_PROMPT_LENGTH:-1024}
MAX_RESPONSE_LENGTH=${MAX_RESPONSE_LENGTH:-8000}

# Rewards
MAX_LENGTH=${MAX_LENGTH:-4000}         # the length budget l, in tokens
CORRECT_WEIGHT=${CORRECT_WEIGHT:-1.0}
LENGTH_WEIGHT=${LENGTH_WEIGHT:-1.0}    # the paper sweeps {1.0, 0.75, 0.5, 0.25} on R1-7B
FILTER_GROUPS=${FILTER_GROUPS:-True}   # DAPO dynamic sampling (verl's V1 trainer)
FILTER_METRIC=${FILTER_METRIC:-score}  # the paper: the summed reward; gdpo_signature: any reward varies
BATCH_NORM=${BATCH_NORM:-token}

# Actor (FSDP) and its loss
LR=${LR:-1e-6}
MINI_BATCH_SIZE=${MINI_BATCH_SIZE:-64}
PPO_EPOCHS=${PPO_EPOCHS:-1}
CLIP_LOW=${CLIP_LOW:-0.2}
CLIP_HIGH=${CLIP_HIGH:-0.28}
LOSS_AGG_MODE=${LOSS_AGG_MODE:-token-mean}
KL_LOSS_COEF=${KL_LOSS_COEF:-0.0005}
KL_LOSS_TYPE=${KL_LOSS_TYPE:-mse}
MAX_TOKENS_PER_GPU=${MAX_TOKENS_PER_GPU:-18432}   # dynamic batch size: prompt + response tokens per GPU
SP_SIZE=${SP_SIZE:-1}                             # Ulysses sequence parallelism for long responses

# Rollout (vLLM)
ROLLOUT_N=${ROLLOUT_N:-16}
TEMPERATURE=${TEMPERATURE:-1.0}
TP=${TP:-1}
GPU_MEMORY_UTILIZATION=${GPU_MEMORY_UTILIZATION:-0.7}

# Trainer
NNODES=${NNODES:-1}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
TOTAL_STEPS=${TOTAL_STEPS:-500}
SAVE_FREQ=${SAVE_FREQ:-50}
TEST_FREQ=${TEST_FREQ:-50}
PROJECT=${PROJECT:-gdpo_math_length}
CHECKPOINT_DIR=${CHECKPOINT_DIR:-$HOME/checkpoints/$PROJECT/$EXPERIMENT}
DUMP_DIR=${DUMP_DIR:-null}             # a directory: per-step GDPO records for gdpo-verl inspect

run_recipe() {
    local config=(--config-path pkg://gdpo_verl.config --config-name gdpo_trainer)
    local algorithm=(
        "algorithm.adv_estimator=${ESTIMATOR}"
        "algorithm.gdpo_reward_keys=[correct,length]"
        "algorithm.gdpo_reward_weights=[${CORRECT_WEIGHT},${LENGTH_WEIGHT}]"
        "algorithm.gdpo.batch_norm=${BATCH_NORM}"
        "algorithm.gdpo.dump_dir=${DUMP_DIR}"
        "algorithm.use_kl_in_reward=False"
        "algorithm.filter_groups.enable=${FILTER_GROUPS}"
        "algorithm.filter_groups.metric=${FILTER_METRIC}"
    )
    local data=(
        "data.train_files=${TRAIN_FILE}"
        "data.val_files=${VAL_FILES}"
        "data.train_batch_size=${TRAIN_BATCH_SIZE}"
        "data.max_prompt_length=${MAX_PROMPT_LENGTH}"
        "data.max_response_length=${MAX_RESPONSE_LENGTH}"
        "data.filter_overlong_prompts=True"
        "data.truncation=error"
    )
    local model=(
        "actor_rollout_ref.model.path=${MODEL}"
        "actor_rollout_ref.model.use_remove_padding=True"
        "actor_rollout_ref.model.enable_gradient_checkpointing=True"
    )
    local actor=(
        "actor_rollout_ref.actor.optim.lr=${LR}"
        "actor_rollout_ref.actor.ppo_mini_batch_size=${MINI_BATCH_SIZE}"
        "actor_rollout_ref.actor.ppo_epochs=${PPO_EPOCHS}"
        "actor_rollout_ref.actor.clip_ratio_low=${CLIP_LOW}"
        "actor_rollout_ref.actor.clip_ratio_high=${CLIP_HIGH}"
        "actor_rollout_ref.actor.loss_agg_mode=${LOSS_AGG_MODE}"
        "actor_rollout_ref.actor.use_kl_loss=True"
        "actor_rollout_ref.actor.kl_loss_coef=${KL_LOSS_COEF}"
        "actor_rollout_ref.actor.kl_loss_type=${KL_LOSS_TYPE}"
        "actor_rollout_ref.actor.use_dynamic_bsz=True"
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=${MAX_TOKENS_PER_GPU}"
        "actor_rollout_ref.actor.ulysses_sequence_parallel_size=${SP_SIZE}"
    )
    local rollout=(
        "actor_rollout_ref.rollout.name=vllm"
        "actor_rollout_ref.rollout.n=${ROLLOUT_N}"
        "actor_rollout_ref.rollout.temperature=${TEMPERATURE}"
        "actor_rollout_ref.rollout.tensor_model_parallel_size=${TP}"
        "actor_rollout_ref.rollout.gpu_memory_utilization=${GPU_MEMORY_UTILIZATION}"
    )
    local reward=(
        "reward.reward_manager.name=gdpo_verl"
        "reward.custom_reward_function.path=pkg://gdpo_verl.rewards.math_length"
        "reward.custom_reward_function.name=compute_score"
        "+reward.custom_reward_function.reward_kwargs.max_length=${MAX_LENGTH}"
        "+reward.custom_reward_function.reward_kwargs.conditioned=${CONDITIONED}"
        "+reward.custom_reward_function.reward_kwargs.think=${THINK}"
    )
    local trainer=(
        "trainer.nnodes=${NNODES}"
        "trainer.n_gpus_per_node=${GPUS_PER_NODE}"
        "trainer.total_training_steps=${TOTAL_STEPS}"
        "trainer.save_freq=${SAVE_FREQ}"
        "trainer.test_freq=${TEST_FREQ}"
        "trainer.project_name=${PROJECT}"
        "trainer.experiment_name=${EXPERIMENT}"
        "trainer.default_local_dir=${CHECKPOINT_DIR}"
        "trainer.logger=[console,tensorboard]"
    )
    local arguments=("${config[@]}" "${algorithm[@]}" "${data[@]}" "${model[@]}" "${actor[@]}" "${rollout[@]}"
                     "${reward[@]}" "${trainer[@]}" "$@")
    if [ "${DRY_RUN:-0}" = 1 ]; then
        python3 -m verl.trainer.main_ppo "${arguments[@]}" --cfg job
        return
    fi
    python3 -m verl.trainer.main_ppo "${arguments[@]}"
}
