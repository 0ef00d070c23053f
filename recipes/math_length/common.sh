#!/usr/bin/env bash
# Shared settings of the math length-constrained experiments (arXiv 2601.05242, section 4.2), sourced by
# every script in this folder after recipes/launch.sh. A script sets ESTIMATOR (grpo|gdpo) and CONDITIONED
# (False|True), declares its MODEL, THINK and EXPERIMENT knobs (and any default it changes, e.g. TP), sources
# this file, and launches with "${MATH_LENGTH[@]}" "$@". Every knob below is an environment variable with a
# default; docs/math-length.md ("Where each default comes from") gives the source of each: the paper, DLER's
# script (the recipe the paper follows), verl's default, or our choice with its reason. Extra arguments are
# passed to verl as hydra overrides.
: "${ESTIMATOR:?the script must set ESTIMATOR (grpo or gdpo)}"
: "${CONDITIONED:?the script must set CONDITIONED (False or True)}"

# Data (scripts/prepare_data.py writes these)
knob DATA_DIR "$HOME/data/math_length"
knob TRAIN_FILE "$DATA_DIR/deepscaler_train.parquet"
knob VAL_FILES "[$DATA_DIR/aime24.parquet,$DATA_DIR/math500.parquet]"
knob TRAIN_BATCH_SIZE "512"
knob MAX_PROMPT_LENGTH "1024"
knob MAX_RESPONSE_LENGTH "8000"
knob PROMPT_OVERFLOW "drop"             # drop | left | right | middle (see ../launch.sh)

# Rewards
knob MAX_LENGTH "4000"                  # the length budget l, in tokens
knob CORRECT_WEIGHT "1.0"
knob LENGTH_WEIGHT "1.0"                # the paper sweeps {1.0, 0.75, 0.5, 0.25} on R1-7B
knob FILTER_GROUPS "True"               # DAPO dynamic sampling (verl's V1 trainer)
knob FILTER_METRIC "score"              # the paper: the summed reward; gdpo_signature: any reward varies
knob BATCH_NORM "token"

# The actor (FSDP) and its loss, vLLM's rollout and the trainer's length: DLER's, as the math kit has them
# (dler_knobs, ../launch.sh); the rollout's tensor parallelism and the project are this kit's
knob TP "1"
dler_knobs
knob PROJECT "gdpo_math_length"
knob DUMP_DIR "null"                    # a directory: per-step GDPO records for gdpo-verl inspect

# MATH_LENGTH: the overrides of one run, from the knobs as they are when it is called (the shared ones from
# ../launch.sh, then the math experiment's own).
math_length_overrides() {
    shared_overrides
    dler_overrides
    MATH_LENGTH=(
        "${SHARED_OVERRIDES[@]}"
        "algorithm.adv_estimator=${ESTIMATOR}"
        "algorithm.gdpo_reward_keys=[correct,length]"
        "algorithm.gdpo_reward_weights=[${CORRECT_WEIGHT},${LENGTH_WEIGHT}]"
        "algorithm.filter_groups.enable=${FILTER_GROUPS}"
        "algorithm.filter_groups.metric=${FILTER_METRIC}"
        "data.train_files=${TRAIN_FILE}"
        "data.val_files=${VAL_FILES}"
        "${DLER_OVERRIDES[@]}"
        "reward.custom_reward_function.path=pkg://gdpo_verl.rewards.math_length"
        "+reward.custom_reward_function.reward_kwargs.max_length=${MAX_LENGTH}"
        "+reward.custom_reward_function.reward_kwargs.conditioned=${CONDITIONED}"
        "+reward.custom_reward_function.reward_kwargs.think=${THINK}"
        # the same weights in the summed score, which GRPO and dynamic sampling use: one weighted objective
        "+reward.custom_reward_function.reward_kwargs.correct_weight=${CORRECT_WEIGHT}"
        "+reward.custom_reward_function.reward_kwargs.length_weight=${LENGTH_WEIGHT}"
        "trainer.total_training_steps=${TOTAL_STEPS}"
    )
}
math_length_overrides
