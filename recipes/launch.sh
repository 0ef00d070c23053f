#!/usr/bin/env bash
# Sourced by every recipe: declare its knobs, then launch verl's main_ppo with gdpo-verl's packaged config, or
# another of verl's trainers (TRAINER).
#
#   knob NAME DEFAULT   NAME=${NAME:-DEFAULT}: an environment variable with a default. Every knob a recipe
#                       declares is passed on to the job by recipes/cluster/submit.sh when it is set there.
#   launch ARGS...      python3 -m verl.trainer.main_ppo --config-path pkg://gdpo_verl.config
#                       --config-name gdpo_trainer ARGS... (hydra overrides), with TRAINER's settings
#
#   DRY_RUN=1    launch prints the fully composed config (verl's --cfg job) instead: no Ray, no GPU
#   CHECK=1      launch runs everything verl's main_ppo checks before Ray (verl's validate_config, gdpo-verl's
#                checks, the checkpoint directory's owner, the memory plan) and stops before Ray starts
#   LIST_KNOBS=1 launch prints the names of the recipe's knobs, one a line, and the recipe exits
#
# Every recipe has these knobs for where a run writes and how it uses memory (docs/gpu-runs.md):
#   CHECKPOINT_DIR=$HOME/checkpoints   a root: the run saves under $CHECKPOINT_DIR/$PROJECT/$EXPERIMENT, and refuses a
#                                      directory another run saved in (on storage every node sees when NNODES > 1)
#   KEEP_CHECKPOINTS=2                 the saves kept (the oldest are deleted; each holds model, optimizer, extra)
#   TENSORBOARD_DIR=$HOME/tensorboard  a root: the run's training curves go to $TENSORBOARD_DIR/$PROJECT/$EXPERIMENT
#   PARAM_OFFLOAD=False                the actor's parameters on the CPU while vLLM generates
#   OPTIMIZER_OFFLOAD=False            Adam's moments on the CPU while vLLM generates
#   GPU_MEMORY_GB=80                   one GPU's memory, for the memory plan printed before Ray starts
#   MEMORY_PLAN=refuse                 stop a setup the plan says cannot fit; warn: print it and go on
# A run is named by the recipe's PROJECT and EXPERIMENT knobs (trainer.project_name, trainer.experiment_name), which
# also name its directories: a trainer.project_name= or trainer.experiment_name= override is refused, naming them.
#
# Every recipe has these knobs (docs/training-loop.md, "Which of verl's trainers"):
#   TRAINER=sync            verl's V1 trainer, trainer.v1.trainer_mode=sync (verl's default)
#           colocate_async  the V1 trainer, rollout and training on the same GPUs, asynchronously
#           separate_async  the V1 trainer, rollout on GPUs of its own (ROLLOUT_NNODES x ROLLOUT_GPUS_PER_NODE,
#                           besides NNODES x GPUS_PER_NODE for training), weights synced by NCCL after each batch
#           legacy          verl's legacy trainer (trainer.use_v1=false)
#           one_step_off    verl.experimental.one_step_off_policy: rollout of the next batch on GPUs of its own
#                           while this one trains
#           fully_async     verl.experimental.fully_async_policy: a rollouter on GPUs of its own streams groups to
#                           the trainer, weights synced once per TRAIN_BATCH_SIZE prompts trained
#   ROLLOUT_NNODES, ROLLOUT_GPUS_PER_NODE   the rollout GPUs of separate_async, one_step_off and fully_async
# The recipe's settings are kept under every trainer (the batch and mini-batch sizes, the number of prompts
# trained). Dynamic sampling (FILTER_GROUPS=True) runs on the V1 trainer only: the others refuse it.
set -euo pipefail

RECIPE_KNOBS=()
knob() {
    if [[ " ${RECIPE_KNOBS[*]} " != *" $1 "* ]]; then
        RECIPE_KNOBS+=("$1")
    fi
    printf -v "$1" '%s' "${!1:-$2}"
}

# knobs too, so that recipes/cluster/submit.sh passes them to the job: a CHECK=1 there must not start a run
knob DRY_RUN "0"
knob CHECK "0"
DRY_RUN_ARGS=()
if [ "$DRY_RUN" = 1 ]; then
    DRY_RUN_ARGS=(--cfg job)
fi

knob TRAINER "sync"
knob ROLLOUT_NNODES "1"
knob ROLLOUT_GPUS_PER_NODE "8"
knob CHECKPOINT_DIR "$HOME/checkpoints"
knob KEEP_CHECKPOINTS "2"
knob TENSORBOARD_DIR "$HOME/tensorboard"
knob PARAM_OFFLOAD "False"
knob OPTIMIZER_OFFLOAD "False"
knob GPU_MEMORY_GB "80"
knob MEMORY_PLAN "refuse"

# The overrides that name the run (the recipe's PROJECT and EXPERIMENT as they are at launch) and give it its own
# directories and its memory settings, from the knobs above. Sets RUN_OVERRIDES.
run_overrides() {
    local name root argument own_directory=0
    : "${PROJECT:?a recipe declares knob PROJECT and knob EXPERIMENT, which name the run and its directories}"
    : "${EXPERIMENT:?a recipe declares knob PROJECT and knob EXPERIMENT, which name the run and its directories}"
    for argument in "$@"; do
        case "$argument" in
            trainer.project_name=* | trainer.experiment_name=* | ++trainer.project_name=* | ++trainer.experiment_name=*)
                echo "$argument: name the run with PROJECT=... and EXPERIMENT=... (knobs), which also name its checkpoint" \
                     "and tensorboard directories; an override would rename the run and leave it another's directories" >&2
                exit 2 ;;
            trainer.default_local_dir=* | ++trainer.default_local_dir=*) own_directory=1 ;;
        esac
    done
    for name in CHECKPOINT_DIR TENSORBOARD_DIR; do
        root=${!name}
        if [[ "$root" != /* ]]; then
            echo "$name must be an absolute path (a job runs in another directory than this shell); got '$root'" >&2
            exit 2
        fi
    done
    # CHECKPOINT_DIR is a root: checkpoints in it directly were saved by a run that took it as its own directory
    # (a trainer.default_local_dir override names the run's directory itself)
    if [ "$own_directory" = 0 ] && { [ -e "$CHECKPOINT_DIR/latest_checkpointed_iteration.txt" ] ||
                                     compgen -G "$CHECKPOINT_DIR/global_step_*" > /dev/null; }; then
        echo "CHECKPOINT_DIR=$CHECKPOINT_DIR holds checkpoints itself, but it is a root: this run's are saved in" \
             "$CHECKPOINT_DIR/$PROJECT/$EXPERIMENT. To resume the run saved there, pass" \
             "trainer.default_local_dir=$CHECKPOINT_DIR; else give CHECKPOINT_DIR a directory that holds runs' directories" >&2
        exit 2
    fi
    if ! [[ "$KEEP_CHECKPOINTS" =~ ^[1-9][0-9]*$ ]]; then
        echo "KEEP_CHECKPOINTS must be a whole number of saves to keep, 1 or more; got '$KEEP_CHECKPOINTS'" >&2
        exit 2
    fi
    RUN_TENSORBOARD_DIR="${TENSORBOARD_DIR%/}/${PROJECT}/${EXPERIMENT}"
    RUN_OVERRIDES=(
        "trainer.project_name=${PROJECT}"
        "trainer.experiment_name=${EXPERIMENT}"
        "trainer.default_local_dir=${CHECKPOINT_DIR%/}/${PROJECT}/${EXPERIMENT}"
        "trainer.max_actor_ckpt_to_keep=${KEEP_CHECKPOINTS}"
        "trainer.max_critic_ckpt_to_keep=${KEEP_CHECKPOINTS}"
        # verl's tensorboard logger reads TENSORBOARD_DIR in the TaskRunner: the job's environment carries it there
        "+ray_kwargs.ray_init.runtime_env.env_vars.TENSORBOARD_DIR=${RUN_TENSORBOARD_DIR}"
        "actor_rollout_ref.actor.fsdp_config.param_offload=${PARAM_OFFLOAD}"
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload=${OPTIMIZER_OFFLOAD}"
    )
}

launch() {
    if [ "${LIST_KNOBS:-0}" = 1 ]; then
        printf '%s\n' "${RECIPE_KNOBS[@]}"
        exit 0
    fi
    # the python on PATH runs the job (on a GPU node, the environment verl and gdpo-verl are installed in)
    if ! python3 -c "import importlib.util as u, sys; sys.exit(not (u.find_spec('verl') and u.find_spec('gdpo_verl')))" \
        2>/dev/null; then
        echo "recipes: python3 ($(command -v python3 || echo 'not found')) cannot import verl and gdpo-verl. Activate" \
             "the environment they are installed in: on a GPU node pip install -e '.[vllm]' there (docs/install.md);" \
             "on a CPU machine, the one scripts/train_cpu.sh makes: source .venv-cpu-training/bin/activate" >&2
        exit 2
    fi
    local entry=(-m verl.trainer.main_ppo --config-path pkg://gdpo_verl.config --config-name gdpo_trainer)
    # verl's experimental trainers: their own configs, with gdpo-verl's settings on top, and verl's trainer
    # configs found by package (their configs name them by a path relative to verl's repository)
    local experimental=("hydra.searchpath=[pkg://verl.trainer.config,pkg://gdpo_verl.config]" +gdpo=settings
                        actor_rollout_ref.hybrid_engine=False
                        "rollout.nnodes=${ROLLOUT_NNODES}" "rollout.n_gpus_per_node=${ROLLOUT_GPUS_PER_NODE}")
    local mode=() last=() per_batch
    case "$TRAINER" in
        sync | colocate_async) mode=("trainer.v1.trainer_mode=${TRAINER}") ;;
        legacy) mode=(trainer.use_v1=false) ;;
        separate_async)
            # one weight sync per batch: verl asserts train_batch_size == parameter_sync_step * ppo_mini_batch_size
            per_batch=$(mini_batches_per_batch)
            mode=(trainer.v1.trainer_mode=separate_async actor_rollout_ref.rollout.checkpoint_engine.backend=nccl
                  "actor_rollout_ref.rollout.nnodes=${ROLLOUT_NNODES}"
                  "actor_rollout_ref.rollout.n_gpus_per_node=${ROLLOUT_GPUS_PER_NODE}"
                  "trainer.v1.separate_async.parameter_sync_step=${per_batch}") ;;
        one_step_off)
            entry=(-m verl.experimental.one_step_off_policy.main_ppo)
            mode=("${experimental[@]}") ;;
        fully_async)
            entry=(-m verl.experimental.fully_async_policy.fully_async_main)
            # the trainer takes one PPO mini-batch of prompts from the rollouter's queue per step and syncs weights
            # after a batch's worth of them; the rollouter generates TOTAL_STEPS batches' worth of prompts (where the
            # recipe has TOTAL_STEPS), one at a time (verl asserts data.train_batch_size=0 and data.gen_batch_size=1,
            # set after the recipe's)
            per_batch=$(mini_batches_per_batch)
            mode=("${experimental[@]}" "async_training.require_batches=1"
                  "async_training.trigger_parameter_sync_step=${per_batch}")
            last=(data.train_batch_size=0 data.gen_batch_size=1)
            # (verl's config caps it at 100 prompts otherwise; null: the epochs of the data the recipe sets)
            if [ -n "${TOTAL_STEPS:-}" ]; then
                last+=("rollout.total_rollout_steps=$((TOTAL_STEPS * TRAIN_BATCH_SIZE))")
            else
                last+=(rollout.total_rollout_steps=null)
            fi ;;
        *)
            echo "TRAINER must be sync, colocate_async, separate_async, legacy, one_step_off or fully_async;" \
                 "got '$TRAINER'" >&2
            exit 2 ;;
    esac
    run_overrides "$@"
    local check=0
    case "$CHECK" in
        0 | "") ;;
        1) check=1 ;;
        *) echo "CHECK must be 1 (check the launch and stop before Ray) or 0; got '${CHECK}'" >&2; exit 2 ;;
    esac
    # RAY_OVERRIDE_JOB_RUNTIME_ENV: under `ray job submit` (recipes/cluster/submit.sh), the run's TENSORBOARD_DIR
    # replaces the root the job's environment carries
    TENSORBOARD_DIR="$RUN_TENSORBOARD_DIR" RAY_OVERRIDE_JOB_RUNTIME_ENV=1 GDPO_VERL_CHECK_ONLY=$check GPU_MEMORY_GB="$GPU_MEMORY_GB" \
        GDPO_VERL_MEMORY_PLAN="$MEMORY_PLAN" \
        python3 "${entry[@]}" ${mode[@]+"${mode[@]}"} "${RUN_OVERRIDES[@]}" "$@" ${last[@]+"${last[@]}"} \
        ${DRY_RUN_ARGS[@]+"${DRY_RUN_ARGS[@]}"}
}

# TRAIN_BATCH_SIZE / MINI_BATCH_SIZE (the recipe's knobs), which must divide.
mini_batches_per_batch() {
    if (( TRAIN_BATCH_SIZE % MINI_BATCH_SIZE != 0 )); then
        echo "TRAINER=$TRAINER syncs weights once per batch of PPO mini-batches: TRAIN_BATCH_SIZE ($TRAIN_BATCH_SIZE)" \
             "must be a multiple of MINI_BATCH_SIZE ($MINI_BATCH_SIZE)" >&2
        exit 2
    fi
    echo $((TRAIN_BATCH_SIZE / MINI_BATCH_SIZE))
}

# The actor (FSDP) and its loss, vLLM's rollout and the trainer's length as DLER's script sets them, the recipe the
# paper's math experiments follow; the coding kit takes the same. math_length/common.sh and coding/common.sh declare
# these knobs with dler_knobs (each its own TP first), and add the overrides shared_overrides leaves out with
# "${DLER_OVERRIDES[@]}" (dler_overrides sets the array). docs/math-length.md ("Where each default comes from")
# gives the source of each default.
dler_knobs() {
    # actor (FSDP) and its loss
    knob LR "1e-6"
    knob MINI_BATCH_SIZE "64"
    knob PPO_EPOCHS "1"
    knob CLIP_LOW "0.2"
    knob CLIP_HIGH "0.28"
    knob CLIP_RATIO_C "10.0"                # verl's default is 3.0
    knob LOSS_AGG_MODE "token-mean"
    knob USE_KL_LOSS "True"
    knob KL_LOSS_COEF "0.0005"
    knob KL_LOSS_TYPE "mse"
    knob ENTROPY_COEFF "0"                  # no entropy bonus: DLER's dler_slurm.sh sets 0 (the paper is silent)
    knob MAX_TOKENS_PER_GPU "18432"         # dynamic batch size: prompt + response tokens per GPU
    knob SP_SIZE "1"                        # Ulysses sequence parallelism for long responses
    # rollout (vLLM)
    knob ROLLOUT_N "16"
    knob TEMPERATURE "1.0"
    knob GPU_MEMORY_UTILIZATION "0.7"
    # trainer
    knob NNODES "1"
    knob GPUS_PER_NODE "8"
    knob TOTAL_STEPS "500"
    knob SAVE_FREQ "50"
    knob TEST_FREQ "50"
}

dler_overrides() {
    DLER_OVERRIDES=(
        "actor_rollout_ref.actor.ppo_epochs=${PPO_EPOCHS}"
        "actor_rollout_ref.actor.clip_ratio_low=${CLIP_LOW}"
        "actor_rollout_ref.actor.clip_ratio_high=${CLIP_HIGH}"
        "actor_rollout_ref.actor.clip_ratio_c=${CLIP_RATIO_C}"
        "actor_rollout_ref.actor.loss_agg_mode=${LOSS_AGG_MODE}"
        "actor_rollout_ref.actor.ulysses_sequence_parallel_size=${SP_SIZE}"
    )
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
        # vLLM sizes for this, not for the model's own context (262,144 tokens for Qwen3-4B-Instruct-2507)
        "actor_rollout_ref.rollout.max_model_len=$((MAX_PROMPT_LENGTH + MAX_RESPONSE_LENGTH))"
        "reward.reward_manager.name=gdpo_verl"
        "reward.custom_reward_function.name=compute_score"
        "trainer.nnodes=${NNODES}"
        "trainer.n_gpus_per_node=${GPUS_PER_NODE}"
        "trainer.save_freq=${SAVE_FREQ}"
        "trainer.test_freq=${TEST_FREQ}"
        "trainer.logger=[console,tensorboard]"
    )
}
