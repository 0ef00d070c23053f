#!/usr/bin/env bash
# GDPO on your own multi-component reward, with verl's FSDP actor and vLLM rollout.
# Every knob is an environment variable with a default; anything after the script name is passed to
# verl as extra hydra overrides. DRY_RUN=1 prints the fully composed config and exits (no Ray, no GPU); CHECK=1
# runs every check verl and gdpo-verl make before Ray and stops there; LIST_KNOBS=1 lists the knobs (recipes/launch.sh). REWARD_FILE must name your reward's file: the run imports it
# before Ray starts, to read what it declares, and refuses one that is not there.
#
#   REWARD_FILE=my_reward.py REWARD_KEYS='[correct,length]' REWARD_WEIGHTS='[1.0,0.5]' \
#   MODEL=/models/Qwen2.5-1.5B-Instruct TRAIN_FILE=train.parquet VAL_FILE=test.parquet \
#       bash recipes/gdpo_custom_reward.sh trainer.total_epochs=3
source "$(dirname "${BASH_SOURCE[0]}")/launch.sh"

knob MODEL "Qwen/Qwen2.5-1.5B-Instruct"
knob TRAIN_FILE "$HOME/data/train.parquet"
knob VAL_FILE "$HOME/data/test.parquet"
knob REWARD_FILE "my_reward.py"
knob REWARD_FUNCTION "compute_score"
knob REWARD_KEYS "[correct,length]"
knob REWARD_WEIGHTS "null"
knob BATCH_NORM "token"
knob FILTER_GROUPS "False"          # dynamic sampling (verl's V1 trainer)
knob FILTER_METRIC "gdpo_signature" # gdpo_signature: any component varies; score: the sum varies
knob TRAIN_BATCH_SIZE "128"
knob MINI_BATCH_SIZE "32"
knob ROLLOUT_N "8"
knob MAX_PROMPT_LENGTH "1024"
knob MAX_RESPONSE_LENGTH "4096"
knob LR "1e-6"
knob KL_LOSS_COEF "0.001"
knob MAX_TOKENS_PER_GPU "16384"         # dynamic batch size: prompt + response tokens per GPU (verl's default)
knob GPU_MEMORY_UTILIZATION "0.6"
knob TP "1"
knob NNODES "1"
knob GPUS_PER_NODE "8"
knob PROJECT "gdpo"
knob EXPERIMENT "gdpo_custom_reward"

ALGORITHM=(
    "algorithm.gdpo_reward_keys=${REWARD_KEYS}"
    "algorithm.gdpo_reward_weights=${REWARD_WEIGHTS}"
    "algorithm.gdpo.batch_norm=${BATCH_NORM}"
    "algorithm.filter_groups.enable=${FILTER_GROUPS}"
    "algorithm.filter_groups.metric=${FILTER_METRIC}"
)
DATA=(
    "data.train_files=${TRAIN_FILE}"
    "data.val_files=${VAL_FILE}"
    "data.train_batch_size=${TRAIN_BATCH_SIZE}"
    "data.max_prompt_length=${MAX_PROMPT_LENGTH}"
    "data.max_response_length=${MAX_RESPONSE_LENGTH}"
)
MODEL_ARGS=("actor_rollout_ref.model.path=${MODEL}")
ACTOR=(
    "actor_rollout_ref.actor.optim.lr=${LR}"
    "actor_rollout_ref.actor.ppo_mini_batch_size=${MINI_BATCH_SIZE}"
    "actor_rollout_ref.actor.use_kl_loss=True"
    "actor_rollout_ref.actor.kl_loss_coef=${KL_LOSS_COEF}"
    "actor_rollout_ref.actor.kl_loss_type=mse"
    "actor_rollout_ref.actor.use_dynamic_bsz=True"
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=${MAX_TOKENS_PER_GPU}"
)
ROLLOUT=(
    "actor_rollout_ref.rollout.name=vllm"
    "actor_rollout_ref.rollout.n=${ROLLOUT_N}"
    "actor_rollout_ref.rollout.tensor_model_parallel_size=${TP}"
    "actor_rollout_ref.rollout.gpu_memory_utilization=${GPU_MEMORY_UTILIZATION}"
    "actor_rollout_ref.rollout.max_model_len=$((MAX_PROMPT_LENGTH + MAX_RESPONSE_LENGTH))"
)
REWARD=(
    "reward.custom_reward_function.path=${REWARD_FILE}"
    "reward.custom_reward_function.name=${REWARD_FUNCTION}"
)
TRAINER_ARGS=(
    "trainer.nnodes=${NNODES}"
    "trainer.n_gpus_per_node=${GPUS_PER_NODE}"
    "trainer.logger=[console,tensorboard]"
)

launch "${ALGORITHM[@]}" "${DATA[@]}" "${MODEL_ARGS[@]}" "${ACTOR[@]}" "${ROLLOUT[@]}" "${REWARD[@]}" "${TRAINER_ARGS[@]}" "$@"
