#!/usr/bin/env bash
# Shared settings of the coding experiment (arXiv 2601.05242, section 4.3: DeepSeek-R1-Distill-Qwen-7B on the code
# split of Eurus-2-RL-Data, rewards pass_rate, length conditioned on passing, and no_bug), sourced by every script
# in this folder after recipes/launch.sh. A script sets ESTIMATOR (grpo | gdpo) and OBJECTIVES (2: pass + length,
# 3: + bug), declares its MODEL and EXPERIMENT knobs, sources this file and launches with "${CODING[@]}" "$@".
# docs/coding.md ("Where each default comes from") gives the source of every default. Extra arguments are passed
# to verl as hydra overrides.
: "${ESTIMATOR:?the script must set ESTIMATOR (grpo or gdpo)}"
: "${OBJECTIVES:?the script must set OBJECTIVES (2 or 3)}"

# Data (scripts/prepare_coding_data.py writes these)
knob DATA_DIR "$HOME/data/coding"
knob TRAIN_FILE "$DATA_DIR/train.parquet"
knob VAL_FILE "$DATA_DIR/validation.parquet"
knob TRAIN_BATCH_SIZE "512"
knob MAX_PROMPT_LENGTH "1024"
knob MAX_RESPONSE_LENGTH "8000"
knob PROMPT_OVERFLOW "drop"             # drop | left | right | middle (see ../launch.sh)

# Rewards
knob MAX_LENGTH "4000"                  # the length budget l, in tokens (the length reward pays only when all pass)
knob PASS_WEIGHT "1.0"
knob LENGTH_WEIGHT "1.0"
knob BUG_WEIGHT "1.0"                   # used with OBJECTIVES=3
knob SANDBOX "local"                    # local (bubblewrap) | fusion (a Sandbox Fusion server) | none (limits only: trusted machines)
knob ISOLATION "strict"                 # SANDBOX=local: strict (root + a writable cgroup: a user id and a cgroup per run) | relaxed
knob WALL_S "10"                        # one test case's run: wall clock, CPU seconds, memory
knob CPU_S "5"                          # (not with SANDBOX=fusion: its requests carry no CPU limit)
knob MEMORY_MB "1024"
knob SANDBOX_SLOTS ""                   # SANDBOX=local/none: test cases run at once per reward worker (default: the
                                        # node's cores / the reward workers on it; docs/coding.md, "Slots")
knob SANDBOX_FUSION_URL ""              # SANDBOX=fusion: the server's run_code endpoint, e.g. http://host:8080/run_code
knob SANDBOX_FUSION_CONCURRENT "64"     # SANDBOX=fusion: requests at once, per reward worker
knob FILTER_GROUPS "True"               # DAPO dynamic sampling on the summed score
knob FILTER_METRIC "score"
knob BATCH_NORM "token"

# The actor (FSDP) and its loss, vLLM's rollout and the trainer's length: DLER's, as the math kit has them
# (dler_knobs, ../launch.sh); the rollout's tensor parallelism and the project are this kit's
knob TP "2"
dler_knobs
knob PROJECT "gdpo_coding"
knob DUMP_DIR "null"

coding_overrides() {
    shared_overrides
    dler_overrides
    local keys="[pass_rate,length]" weights="[${PASS_WEIGHT},${LENGTH_WEIGHT}]"
    if [ "$OBJECTIVES" = 3 ]; then
        keys="[pass_rate,length,no_bug]" weights="[${PASS_WEIGHT},${LENGTH_WEIGHT},${BUG_WEIGHT}]"
    fi
    CODING=(
        "${SHARED_OVERRIDES[@]}"
        "algorithm.adv_estimator=${ESTIMATOR}"
        "algorithm.gdpo_reward_keys=${keys}"
        "algorithm.gdpo_reward_weights=${weights}"
        "algorithm.filter_groups.enable=${FILTER_GROUPS}"
        "algorithm.filter_groups.metric=${FILTER_METRIC}"
        "data.train_files=${TRAIN_FILE}"
        "data.val_files=${VAL_FILE}"
        "${DLER_OVERRIDES[@]}"
        "reward.custom_reward_function.path=pkg://gdpo_verl.rewards.coding"
        "+reward.custom_reward_function.reward_kwargs.objectives=${OBJECTIVES}"
        "+reward.custom_reward_function.reward_kwargs.max_length=${MAX_LENGTH}"
        "+reward.custom_reward_function.reward_kwargs.sandbox=${SANDBOX}"
        "+reward.custom_reward_function.reward_kwargs.wall_s=${WALL_S}"
        # the same weights in the summed score, which GRPO and dynamic sampling use: one weighted objective
        "+reward.custom_reward_function.reward_kwargs.pass_rate_weight=${PASS_WEIGHT}"
        "+reward.custom_reward_function.reward_kwargs.length_weight=${LENGTH_WEIGHT}"
        "+reward.custom_reward_function.reward_kwargs.no_bug_weight=${BUG_WEIGHT}"
        "trainer.total_training_steps=${TOTAL_STEPS}"
    )
    if [ "$SANDBOX" = fusion ]; then
        # verl's own settings for the server; the memory limit travels in each request
        CODING+=(
            "reward.sandbox_fusion.url=${SANDBOX_FUSION_URL:-null}"
            "reward.sandbox_fusion.max_concurrent=${SANDBOX_FUSION_CONCURRENT}"
            "reward.sandbox_fusion.memory_limit_mb=${MEMORY_MB}"
        )
    else
        CODING+=(
            "+reward.custom_reward_function.reward_kwargs.cpu_s=${CPU_S}"
            "+reward.custom_reward_function.reward_kwargs.memory_mb=${MEMORY_MB}"
            "+reward.custom_reward_function.reward_kwargs.isolation=${ISOLATION}"
        )
        if [ -n "$SANDBOX_SLOTS" ]; then
            CODING+=("+reward.custom_reward_function.reward_kwargs.slots=${SANDBOX_SLOTS}")
        fi
    fi
}
coding_overrides
