"""The names verl's config selects this package's estimators by (``algorithm.adv_estimator``), and what they resolve
to."""

# The name verl's config selects the estimator by (algorithm.adv_estimator), and what it resolves to when it is ours.
ESTIMATOR_NAME = "gdpo"
OURS = "gdpo_verl.verl_adapter.estimator.compute_gdpo_advantage"
# CorrGRPO (gdpo_verl.core.corrgrpo): this package's name for it, then the one its authors' verl fork registers.
CORRGRPO_NAMES = ("corrgrpo", "grpo_covariance_coefficient")
# Every algorithm.adv_estimator this package registers; each reads algorithm.gdpo_reward_keys and runs in a Step.
OUR_ESTIMATORS = (ESTIMATOR_NAME, *CORRGRPO_NAMES)
