#!/usr/bin/env bash
# Sourced by every recipe: declare its knobs, then launch verl's main_ppo with gdpo-verl's packaged config.
#
#   knob NAME DEFAULT   NAME=${NAME:-DEFAULT}: an environment variable with a default. Every knob a recipe
#                       declares is passed on to the job by recipes/cluster/submit.sh when it is set there.
#   launch ARGS...      python3 -m verl.trainer.main_ppo --config-path pkg://gdpo_verl.config
#                       --config-name gdpo_trainer ARGS... (hydra overrides)
#
#   DRY_RUN=1    launch prints the fully composed config (verl's --cfg job) instead: no Ray, no GPU
#   LIST_KNOBS=1 launch prints the names of the recipe's knobs, one a line, and the recipe exits
set -euo pipefail

RECIPE_KNOBS=()
DRY_RUN_ARGS=()
if [ "${DRY_RUN:-0}" = 1 ]; then
    DRY_RUN_ARGS=(--cfg job)
fi

knob() {
    if [[ " ${RECIPE_KNOBS[*]} " != *" $1 "* ]]; then
        RECIPE_KNOBS+=("$1")
    fi
    printf -v "$1" '%s' "${!1:-$2}"
}

launch() {
    if [ "${LIST_KNOBS:-0}" = 1 ]; then
        printf '%s\n' "${RECIPE_KNOBS[@]}"
        exit 0
    fi
    python3 -m verl.trainer.main_ppo --config-path pkg://gdpo_verl.config --config-name gdpo_trainer "$@" \
        ${DRY_RUN_ARGS[@]+"${DRY_RUN_ARGS[@]}"}
}

# The overrides the paper's experiments share (math_length/, tool_calling/), from knobs their common.sh declares:
# data sizes, the model, the FSDP actor and its KL loss, vLLM rollout, the gdpo_verl reward manager, the trainer.
# Sets the array SHARED_OVERRIDES. PROMPT_OVERFLOW: drop (leave prompts over MAX_PROMPT_LENGTH out of the data) or
# left / right / middle (verl truncates them there).
shared_overrides() {
    local filter truncation
    case "$PROMPT_OVERFLOW" in
        drop) filter=True truncation=error ;;
        left | right | middle) filter=False truncation=$PROMPT_OVERFLOW ;;
        *) echo "PROMPT_OVERFLOW must be drop, left, right or middle; got '$PROMPT_OVERFLOW'" >&2; exit 2 ;;
    esac
    SHARED_OVERRIDES=(
        "algorithm.gdpo.batch_norm=${BATCH_NORM}"
        "algorithm.gdpo.dump_dir=${DUMP_DIR}"
        "algorithm.use_kl_in_reward=False"
        "data.train_batch_size=${TRAIN_BATCH_SIZE}"
        "data.max_prompt_length=${MAX_PROMPT_LENGTH}"
        "data.max_response_length=${MAX_RESPONSE_LENGTH}"
        "data.filter_overlong_prompts=${filter}"
        "data.truncation=${truncation}"
        "actor_rollout_ref.model.path=${MODEL}"
        "actor_rollout_ref.model.use_remove_padding=True"
        "actor_rollout_ref.model.enable_gradient_checkpointing=True"
        "actor_rollout_ref.actor.optim.lr=${LR}"
        "actor_rollout_ref.actor.ppo_mini_batch_size=${MINI_BATCH_SIZE}"
        "actor_rollout_ref.actor.use_kl_loss=${USE_KL_LOSS}"
        "actor_rollout_ref.actor.kl_loss_coef=${KL_LOSS_COEF}"
        "actor_rollout_ref.actor.kl_loss_type=${KL_LOSS_TYPE}"
        "actor_rollout_ref.actor.entropy_coeff=${ENTROPY_COEFF}"
        "actor_rollout_ref.actor.use_dynamic_bsz=True"
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=${MAX_TOKENS_PER_GPU}"
        "actor_rollout_ref.rollout.name=vllm"
        "actor_rollout_ref.rollout.n=${ROLLOUT_N}"
        "actor_rollout_ref.rollout.temperature=${TEMPERATURE}"
        "actor_rollout_ref.rollout.tensor_model_parallel_size=${TP}"
        "actor_rollout_ref.rollout.gpu_memory_utilization=${GPU_MEMORY_UTILIZATION}"
        "reward.reward_manager.name=gdpo_verl"
        "reward.custom_reward_function.name=compute_score"
        "trainer.nnodes=${NNODES}"
        "trainer.n_gpus_per_node=${GPUS_PER_NODE}"
        "trainer.save_freq=${SAVE_FREQ}"
        "trainer.test_freq=${TEST_FREQ}"
        "trainer.project_name=${PROJECT}"
        "trainer.experiment_name=${EXPERIMENT}"
        "trainer.default_local_dir=${CHECKPOINT_DIR:-$HOME/checkpoints/$PROJECT/$EXPERIMENT}"
        "trainer.logger=[console,tensorboard]"
    )
}
