"""CorrGRPO (algorithm.adv_estimator=corrgrpo, and its authors' name grpo_covariance_coefficient) through verl's
advantage stages: the legacy trainer's compute_advantage on a real DataProto (verl passes these names no
non_tensor_batch: the trainer hook's Step carries it) and the V1 trainer's _compute_advantage with real Ray and
TransferQueue; settings and their refusals."""

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

import verl  # noqa: F401  (loads the entry point)
from verl import DataProto
from verl.trainer.ppo import core_algos, ray_trainer
from verl.trainer.ppo.ray_trainer import compute_advantage

from gdpo_verl.core.conditions import Condition
from gdpo_verl.core.options import GdpoOptions
from gdpo_verl.core.corrgrpo import corrgrpo_advantage, corrgrpo_outcome_parts, corrgrpo_parts
from gdpo_verl.core.diagnostics import advantage_metrics
from gdpo_verl.records.steps import load_steps, step_parts
from gdpo_verl.verl_adapter.estimator import Step, compute_corrgrpo_advantage, running
from gdpo_verl.verl_adapter.settings import check_config, settings_from_config
from tests.integration.verl_adapter.legacy_batch import rollout_batch
from tests.integration.verl_adapter.v1_samples import KEYS, put_samples, random_samples, read_advantages, trainer

NAMES = ["corrgrpo", "grpo_covariance_coefficient"]


def algorithm(estimator="corrgrpo", **keys):
    base = {"adv_estimator": estimator, "norm_adv_by_std_in_grpo": True, "use_kl_in_reward": False,
            "gdpo_reward_keys": ["correct", "length"]}
    return OmegaConf.create(base | keys)


def run(data, config):
    return compute_advantage(data, adv_estimator=config.adv_estimator,
                             norm_adv_by_std_in_grpo=config.norm_adv_by_std_in_grpo, config=config)


@pytest.mark.parametrize("name", NAMES)
def test_both_names_are_registered(name):
    assert core_algos.get_adv_estimator_fn(name) is compute_corrgrpo_advantage
    assert core_algos.get_adv_estimator_fn("gdpo") is not compute_corrgrpo_advantage


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("keys", [{}, {"gdpo_reward_weights": [1.0, -0.5]}, {"norm_adv_by_std_in_grpo": False},
                                  {"gdpo": {"eps": 1e-3}}], ids=str)
def test_legacy_compute_advantage_returns_corrgrpo(name, keys):
    data, components = rollout_batch(seed=4, rewards=("correct", "length"))
    config = algorithm(name, **keys)
    out = run(data, config)
    weights = dict(zip(config.gdpo_reward_keys, config.get("gdpo_reward_weights", [1.0, 1.0])))
    expected = corrgrpo_advantage(components, data.batch["response_mask"], data.non_tensor_batch["uid"], weights,
                                  norm_by_std=config.norm_adv_by_std_in_grpo,
                                  eps=config.get("gdpo", {}).get("eps", 1e-6))
    torch.testing.assert_close(out.batch["advantages"], expected, rtol=0, atol=0)
    assert torch.equal(out.batch["returns"], out.batch["advantages"])
    # not GDPO's advantages (which verl would have computed had the name fallen through to "gdpo")
    gdpo = run(rollout_batch(seed=4)[0], algorithm("gdpo", **keys)).batch["advantages"]
    assert not torch.allclose(out.batch["advantages"], gdpo)


def test_legacy_metrics_are_the_diagnostics_of_the_corrgrpo_step():
    data, components = rollout_batch(seed=6)
    out = run(data, algorithm())
    metrics = ray_trainer.compute_data_metrics(batch=out, use_critic=False)
    parts = corrgrpo_parts(components, data.batch["response_mask"], data.non_tensor_batch["uid"])
    expected = advantage_metrics(parts)
    assert {key: value for key, value in metrics.items() if key.startswith("gdpo/")} == pytest.approx(expected)
    assert "gdpo/unrewarded_frac" in metrics


def test_none_components_and_conditions_on_the_legacy_path():
    correct = [1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0]
    code = [1.0, 0.0, 0.0, None, None, 0.5, None, 0.5]
    lengths = [3, 4, 2, 5, 4, 4, 1, 3]
    uids = ["a", "a", "a", "b", "b", "b", "b", "a"]
    mask = (torch.arange(5)[None] < torch.tensor(lengths)[:, None]).long()
    code_array = np.empty(8, dtype=object)
    code_array[:] = code
    data = DataProto.from_dict(
        tensors={"response_mask": mask, "token_level_scores": torch.zeros(8, 5), "token_level_rewards": torch.zeros(8, 5)},
        non_tensors={"uid": np.array(uids, dtype=object), "correct": np.array(correct), "code": code_array})
    condition = {"reward": "code", "given": "correct", "at_least": 1}
    config = algorithm(gdpo_reward_keys=["correct", "code"], gdpo={"conditions": [condition]})
    with running(Step(settings_from_config(config), global_step=2)) as step:  # a caller's own step, as the demo's
        out = run(data, config)
    expected = corrgrpo_outcome_parts({"correct": correct, "code": code}, lengths, uids,
                                      options=GdpoOptions(conditions=[Condition(**condition)])).final
    torch.testing.assert_close(out.batch["advantages"], (expected[:, None] * mask).float())
    assert step.metrics["gdpo/code/applies_frac"] == 5 / 8


def test_the_authors_config_needs_the_reward_keys_and_names_them():
    data, _ = rollout_batch()
    config = algorithm("grpo_covariance_coefficient", gdpo_reward_keys=None)
    with pytest.raises(ValueError, match=r"adv_estimator=grpo_covariance_coefficient \(CorrGRPO\) needs "
                                         r"algorithm\.gdpo_reward_keys"):
        run(data, config)
    with pytest.raises(ValueError, match=r"needs algorithm\.gdpo_reward_keys"):
        check_config(OmegaConf.create({"algorithm": config}))
    with pytest.raises(ValueError, match=r"compute_score returned no 'format', .* the batch reached the advantage step holding the "
                                         r"per-response keys"):
        run(data, algorithm("grpo_covariance_coefficient", gdpo_reward_keys=["correct", "format"]))
    settings = check_config(OmegaConf.create({"algorithm": algorithm("grpo_covariance_coefficient")}))
    assert settings.estimator == "corrgrpo"


@pytest.mark.parametrize("option", [{"batch_norm": "sequence"}, {"baseline": "leave_one_out"}, {"conflict": "snr"},
                                    {"adaptive_weights": "saw"}], ids=str)
def test_gdpo_only_options_are_refused_under_corrgrpo(option):
    with pytest.raises(ValueError, match=rf"algorithm\.gdpo\.{next(iter(option))}=.*belong\(s\) to GDPO's steps"):
        settings_from_config(algorithm(gdpo=option))
    settings_from_config(algorithm("gdpo", gdpo=option))  # GDPO itself takes them


def test_an_eps_of_zero_is_refused_at_start_up_under_corrgrpo():
    with pytest.raises(ValueError, match=r"algorithm\.gdpo\.eps=0 with algorithm\.adv_estimator=corrgrpo"):
        check_config(OmegaConf.create({"algorithm": algorithm(gdpo={"eps": 0.0})}))
    settings_from_config(algorithm(gdpo={"eps": 0.0}, norm_adv_by_std_in_grpo=False))  # not read without the division


def test_the_packaged_config_runs_corrgrpo():
    settings = settings_from_config(trainer("algorithm.adv_estimator=corrgrpo").config.algorithm)
    assert settings.estimator == "corrgrpo" and settings.reward_keys == tuple(KEYS)


def test_v1_stage_computes_corrgrpo_and_matches_the_legacy_path(transfer_queue, tmp_path):
    samples = random_samples(seed=11)
    batch = put_samples(samples)
    metrics = {}
    stage = trainer("algorithm.adv_estimator=grpo_covariance_coefficient", f"algorithm.gdpo.dump_dir={tmp_path}")
    stage.global_steps = 4
    stage._compute_advantage(batch, metrics)
    advantages, mask = read_advantages(batch)
    uids = [uid for uid, *_ in samples]
    rewards = {key: torch.tensor([info[key] for *_, info in samples]) for key in KEYS}
    parts = corrgrpo_parts(rewards, mask, uids)
    torch.testing.assert_close(advantages, parts.advantages, rtol=1e-6, atol=1e-6)
    assert metrics == pytest.approx(advantage_metrics(parts))

    legacy = DataProto.from_dict(
        tensors={"response_mask": mask, "token_level_rewards": torch.zeros(mask.shape)},
        non_tensors={"uid": np.array(uids, dtype=object),
                     **{key: np.array([info[key] for *_, info in samples]) for key in KEYS}})
    legacy = compute_advantage(legacy, adv_estimator="corrgrpo", config=trainer("algorithm.adv_estimator=corrgrpo")
                               .config.algorithm)
    torch.testing.assert_close(advantages, legacy.batch["advantages"], rtol=0, atol=0)

    # the step's record says it was CorrGRPO, and recomputing it gives the advantages it trained on
    (record,) = load_steps(tmp_path)
    assert record.step == 4 and record.estimator == "corrgrpo"
    torch.testing.assert_close(step_parts(record).final, parts.final, rtol=0, atol=1e-6)


def test_v1_multi_output_sessions_share_the_last_outputs_advantage(transfer_queue):
    base = random_samples(seed=12, groups=3, group_size=4)
    samples = [(uid, session, output, length + output, info) for uid, session, _, length, info in base
               for output in range(2)]
    batch = put_samples(samples)
    trainer("algorithm.adv_estimator=corrgrpo")._compute_advantage(batch, {})
    advantages, mask = read_advantages(batch)
    finals = [i for i, sample in enumerate(samples) if sample[2] == 1]
    expected = corrgrpo_outcome_parts({key: [samples[i][4][key] for i in finals] for key in KEYS},
                                      mask[finals].sum(1), [samples[i][0] for i in finals]).final
    for row, sample in enumerate(samples):
        session_final = finals.index(row - sample[2] + 1)
        valid = advantages[row][mask[row].bool()]
        torch.testing.assert_close(valid, torch.full_like(valid, expected[session_final].item()), rtol=1e-6, atol=1e-6)


RESOLVE_BOTH = (
    "import verl\n"
    "from verl.trainer.ppo import core_algos\n"
    "for name in ('corrgrpo', 'grpo_covariance_coefficient'):\n"
    "    fn = core_algos.get_adv_estimator_fn(name)\n"
    "    try:\n"
    "        fn(token_level_rewards=None, response_mask=None)\n"
    "    except RuntimeError as exc:\n"
    "        print('refused:', exc)\n"
    "    except Exception:\n"
    "        print('resolved:', name, fn.__qualname__)\n"
)


@pytest.mark.parametrize("level", ["WARNING", "verbose"])
def test_a_fresh_verl_resolves_both_names_or_refuses_them_when_the_plugin_failed(level):
    import os
    import subprocess
    import sys

    env = {**os.environ, "GDPO_VERL_LOGGING_LEVEL": level}  # "verbose" makes the plugin fail to load
    result = subprocess.run([sys.executable, "-c", RESOLVE_BOTH], capture_output=True, text=True, timeout=180, env=env)
    assert result.returncode == 0, result.stderr
    for name in NAMES:
        if level == "WARNING":
            assert f"resolved: {name} compute_corrgrpo_advantage" in result.stdout
        else:
            assert f"refused: algorithm.adv_estimator={name}: gdpo-verl failed to register" in result.stdout


def test_v1_padding_samples_do_not_change_real_advantages(transfer_queue):
    from verl.trainer.ppo.padding_utils import upsample_batch_to_divisible_size

    samples = random_samples(seed=13, groups=3, group_size=3)
    padded = upsample_batch_to_divisible_size(put_samples(samples), 8, eos_token_id=0)
    metrics = {}
    trainer("algorithm.adv_estimator=corrgrpo")._compute_advantage(padded, metrics)
    advantages, mask = read_advantages(padded)
    real = mask[:9]
    expected = corrgrpo_parts({key: torch.tensor([info[key] for *_, info in samples]) for key in KEYS},
                              real[:, : real.sum(1).max()], [uid for uid, *_ in samples]).advantages
    torch.testing.assert_close(advantages[:9, : expected.shape[1]], expected, rtol=1e-6, atol=1e-6)
    assert advantages[9:].abs().sum() == 0
    assert metrics["gdpo/distinct_adv_per_group"] <= 3  # the 3 real groups only
