#!/usr/bin/env bash
# Shared settings of the tool-calling experiment (arXiv 2601.05242, section 4.1: ToolRL data, a format and a
# correctness reward), sourced by every script in this folder after recipes/launch.sh. A script sets ESTIMATOR
# (grpo | gdpo | grpo_no_std), declares its MODEL and EXPERIMENT knobs, sources this file and launches with
# "${TOOL_CALLING[@]}" "$@". Defaults are the official GDPO code's (NVlabs/GDPO, verl-GDPO/train_gdpo.sh) except
# where a comment says otherwise; extra arguments are passed to verl as hydra overrides.
: "${ESTIMATOR:?the script must set ESTIMATOR (grpo, gdpo or grpo_no_std)}"

# Data (scripts/prepare_tool_data.py writes these)
knob DATA_DIR "$HOME/data/tool_calling"
knob TRAIN_FILE "$DATA_DIR/train.parquet"
knob VAL_FILE "$DATA_DIR/test.parquet"
knob TRAIN_BATCH_SIZE "512"
knob MAX_PROMPT_LENGTH "2048"
knob MAX_RESPONSE_LENGTH "1024"
knob PROMPT_OVERFLOW "drop"             # drop | left | right | middle (see ../launch.sh)

# Rewards: format in {0, 1}, correctness in [-CORRECT_SCALE, CORRECT_SCALE]
knob FORMAT_WEIGHT "1.0"
knob CORRECT_WEIGHT "1.0"
knob CORRECT_SCALE "3.0"
# bfcl: values typed as BFCL's checker types them (10.0 does not answer an integer, 1 does not answer true), as
# the evaluation scores them; toolrl: Python's == as in ToolRL and the official code (docs/tool-calling.md, section 2)
knob VALUE_RULE "bfcl"
knob BATCH_NORM "token"

# Actor (FSDP) and its loss. KL: the official script has no KL loss but a KL penalty of 0.001 in the reward,
# which its GRPO baseline trains on and GDPO (which reads the reward components) drops. Here both estimators
# get the same: no KL by default; USE_KL_LOSS=True puts KL in the loss for both (gdpo-verl refuses KL in the reward
# under GDPO, and a KL in GRPO's reward alone would not compare like with like).
knob LR "1e-6"
knob MINI_BATCH_SIZE "128"
knob USE_KL_LOSS "False"
knob KL_LOSS_COEF "0.001"
knob KL_LOSS_TYPE "low_var_kl"
# The official runs trained with an entropy bonus of 0.001: train_gdpo.sh leaves it to its verl's ppo_trainer.yaml,
# whose default it was then (verl 0.9.1's default is 0).
knob ENTROPY_COEFF "0.001"
knob MAX_TOKENS_PER_GPU "16384"         # dynamic batch size: prompt + response tokens per GPU (verl's default)

# Rollout (vLLM)
knob ROLLOUT_N "4"
knob TEMPERATURE "1.0"
knob TP "1"
knob GPU_MEMORY_UTILIZATION "0.6"

# Trainer: 15 epochs of about 3.9k rows in batches of 512 (verl drops the last, partial batch of an epoch: 7 a
# epoch) is about 105 steps (the paper: about 100)
knob NNODES "1"
knob GPUS_PER_NODE "8"
knob TOTAL_EPOCHS "15"
knob SAVE_FREQ "10"
knob TEST_FREQ "10"
knob PROJECT "gdpo_tool_calling"
knob DUMP_DIR "null"                    # a directory: per-step GDPO records for gdpo-verl inspect

case "$ESTIMATOR" in
    gdpo) ADV_ESTIMATOR=gdpo NORM_BY_STD=True ;;
    grpo) ADV_ESTIMATOR=grpo NORM_BY_STD=True ;;
    grpo_no_std) ADV_ESTIMATOR=grpo NORM_BY_STD=False ;;
    *) echo "ESTIMATOR must be grpo, gdpo or grpo_no_std; got '$ESTIMATOR'" >&2; exit 2 ;;
esac
if [ "$ADV_ESTIMATOR" = grpo ] && [ "$DUMP_DIR" != null ]; then
    echo "DUMP_DIR records GDPO's advantages, which a GRPO run does not train on; unset it (the gdpo/ metrics are logged anyway)." >&2
    exit 2
fi

shared_overrides
TOOL_CALLING=(
    "${SHARED_OVERRIDES[@]}"
    # under grpo the reward keys only make verl log the gdpo/ metrics of what GDPO would do
    "algorithm.adv_estimator=${ADV_ESTIMATOR}"
    "algorithm.norm_adv_by_std_in_grpo=${NORM_BY_STD}"
    "algorithm.gdpo_reward_keys=[format,correct]"
    "algorithm.gdpo_reward_weights=[${FORMAT_WEIGHT},${CORRECT_WEIGHT}]"
    "data.train_files=${TRAIN_FILE}"
    "data.val_files=${VAL_FILE}"
    "reward.custom_reward_function.path=pkg://gdpo_verl.rewards.tool_calling"
    "+reward.custom_reward_function.reward_kwargs.correct_scale=${CORRECT_SCALE}"
    "+reward.custom_reward_function.reward_kwargs.value_rule=${VALUE_RULE}"
    # the same weights in the summed score, which GRPO trains on: every estimator sees one weighted objective
    "+reward.custom_reward_function.reward_kwargs.format_weight=${FORMAT_WEIGHT}"
    "+reward.custom_reward_function.reward_kwargs.correct_weight=${CORRECT_WEIGHT}"
    "trainer.total_epochs=${TOTAL_EPOCHS}"
)
