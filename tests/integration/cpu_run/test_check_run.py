"""check_run.py fails a run for each thing that can go wrong, on hand-written outputs (no training run)."""
from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from gdpo_verl.cpu_run import check_run
from gdpo_verl.verl_adapter import file_logger

ADVANTAGES = [1.5, -0.5, -1.0, 0.0]


KEYS = ("correct", "length")


def write_config(out, keys=KEYS, dump_dir="gdpo"):
    """hydra's record of the run's composed config, as the CPU run has hydra write it (OUT/hydra/.hydra)."""
    config = out / "hydra" / ".hydra"
    config.mkdir(parents=True, exist_ok=True)
    dump = "null" if dump_dir is None else str(out / dump_dir)
    (config / "config.yaml").write_text(f"algorithm:\n  adv_estimator: gdpo\n  gdpo_reward_keys: [{', '.join(keys)}]\n"
                                        f"  gdpo:\n    dump_dir: {dump}\n")


def write_run(out, *, metrics=None, advantages=ADVANTAGES, trained=None):
    """A finished one-step run as scripts/run_cpu_training.sh leaves it; keyword arguments spoil one part of it."""
    write_config(out)
    initial = {"a.weight": torch.zeros(2, 2), "b.weight": torch.ones(3)}
    trained = trained if trained is not None else {name: value + 0.01 for name, value in initial.items()}
    (out / "model").mkdir(parents=True)
    save_file(initial, out / "model" / "model.safetensors")
    shard = out / "checkpoints" / "global_step_1" / "actor"
    shard.mkdir(parents=True)
    torch.save(trained, shard / "model_world_size_1_rank_0.pt")
    data = {name: 0.5 for name in check_run.gdpo_metrics(KEYS)}
    data.update({
        "critic/advantages/min": min(advantages),
        "critic/advantages/max": max(advantages),
        "training/rollout_probs_diff_max": 0.001,
        "timing_s/step": 1.0,
    })
    data.update(metrics or {})
    (out / "metrics.jsonl").write_text(json.dumps({"step": 1, "data": data}) + "\n")
    (out / "gdpo").mkdir()
    (out / "gdpo" / "gdpo_steps.jsonl").write_text(json.dumps({"step": 1, "advantage": advantages}) + "\n")


def test_a_run_that_trained_passes(tmp_path):
    write_run(tmp_path)
    lines, problems, no_signal = check_run.check(tmp_path, 1)
    assert problems == [] and no_signal is None
    assert lines[0].startswith("step 1 of 1: correct 0.500  length 0.500  distinct advantages per group GDPO 0.50 / "
                               "GRPO 0.50  advantages [-1.000, +1.500]  rollout/actor probs diff 0.0010  1.0 s")
    assert lines[-1] == "weights: 2 of 2 tensors changed, largest change 0.0100"
    assert check_run.main([str(tmp_path), "--steps", "1"]) == 0
    assert check_run.check(tmp_path, 1, brief=True)[0] == lines[1:]  # the run showed the step lines as it went


def test_the_verdict_follows_the_runs_own_config(tmp_path):
    # a reward of the user's with other components, and records written elsewhere (algorithm.gdpo.dump_dir)
    write_run(tmp_path, metrics={f"gdpo/{key}/{name}": 0.5 for key in ("format", "exact")
                                 for name in ("mean", "zero_var_group_frac")})
    (tmp_path / "gdpo").rename(tmp_path / "elsewhere")
    write_config(tmp_path, keys=("format", "exact"), dump_dir="elsewhere")
    lines, problems, _ = check_run.check(tmp_path, 1)
    assert problems == [] and "format 0.500" in lines[0]
    # no records at all (dump_dir=null): the check that needs them is said not to be made; the rest holds
    write_config(tmp_path, keys=("format", "exact"), dump_dir=None)
    lines, problems, _ = check_run.check(tmp_path, 1)
    assert problems == [] and lines[0].startswith("not checked: that verl trained on the estimator's advantages")
    # a reward key the run did not log is the estimator not running, named with the config it read
    write_config(tmp_path, keys=("format", "missing"), dump_dir=None)
    assert "algorithm.gdpo_reward_keys=['format', 'missing']: the plugin's estimator did not run" in \
        check_run.check(tmp_path, 1)[1][0]
    (tmp_path / "hydra" / ".hydra" / "config.yaml").unlink()
    assert "no record of the run's config" in check_run.check(tmp_path, 1)[1][0]


def test_a_run_that_trained_on_zero_advantages_at_every_step_is_no_signal_naming_the_constant_components(tmp_path,
                                                                                                          capsys):
    write_run(tmp_path, advantages=[0.0] * 4, trained={"a.weight": torch.zeros(2, 2), "b.weight": torch.ones(3)},
              metrics={"gdpo/correct/zero_var_group_frac": 1.0, "gdpo/length/zero_var_group_frac": 1.0})
    _, problems, no_signal = check_run.check(tmp_path, 1)
    assert problems == []  # the weights did not change: with every advantage 0 that is what training does
    assert "correct, length were constant in every group" in no_signal
    assert check_run.main([str(tmp_path), "--steps", "1"]) == 1
    assert capsys.readouterr().err.startswith("GDPO CPU training run: NO SIGNAL (1 steps trained; every GDPO advantage")


@pytest.mark.parametrize(
    ("spoil", "problem"),
    [
        ({"metrics": {"training/rollout_probs_diff_max": 0.15}}, "the weight sync did not reach the rollout server"),
        (
            {"metrics": {"critic/advantages/max": 2.0}},
            "verl trained on advantages in [-1.000000, 2.000000], the estimator's record says [-1.000000, 1.500000]",
        ),
        (
            {"trained": {"a.weight": torch.zeros(2, 2), "b.weight": torch.ones(3) * 2}},
            "weights unchanged after 1 steps: ['a.weight']",
        ),
    ],
)
def test_each_failure_is_named(tmp_path, spoil, problem):
    write_run(tmp_path, **spoil)
    _, problems, _ = check_run.check(tmp_path, 1)
    assert len(problems) == 1 and problem in problems[0]
    assert check_run.main([str(tmp_path), "--steps", "1"]) == 1


def test_a_step_with_every_advantage_zero_is_named_but_fails_a_run_only_when_every_step_has_them(tmp_path):
    # a policy that gives one answer to every prompt makes every group's rewards equal: a legitimate step (the
    # resumed run in test_cpu_training reached one at step 4); a run with nothing to learn at any step is not
    write_run(tmp_path)
    step_2 = json.loads((tmp_path / "metrics.jsonl").read_text())
    step_2["step"] = 2
    step_2["data"].update({"critic/advantages/min": 0.0, "critic/advantages/max": 0.0})
    with open(tmp_path / "metrics.jsonl", "a") as metrics:
        metrics.write(json.dumps(step_2) + "\n")
    with open(tmp_path / "gdpo" / "gdpo_steps.jsonl", "a") as records:
        records.write(json.dumps({"step": 2, "advantage": [0.0] * 4}) + "\n")
    checkpoints = tmp_path / "checkpoints"
    (checkpoints / "global_step_1").rename(checkpoints / "global_step_2")
    lines, problems, no_signal = check_run.check(tmp_path, 2)
    assert problems == [] and no_signal is None
    assert "steps [2]: every GDPO advantage is 0 (every group's rewards equal): nothing to learn there" in lines


def test_a_run_without_the_plugin_metrics_or_steps_fails(tmp_path):
    write_run(tmp_path)
    metrics = json.loads((tmp_path / "metrics.jsonl").read_text())
    del metrics["data"]["gdpo/cancelled_group_frac"]
    (tmp_path / "metrics.jsonl").write_text(json.dumps(metrics) + "\n")
    _, problems, _ = check_run.check(tmp_path, 2)
    assert problems == [
        "step 1: gdpo metrics missing: ['gdpo/cancelled_group_frac'] (algorithm.adv_estimator=gdpo, "
        "algorithm.gdpo_reward_keys=['correct', 'length']: the plugin's estimator did not run)",
        f"step 2: not in {tmp_path / 'metrics.jsonl'} (the run stopped before it)",
        f"no checkpoint for step 2 under {tmp_path / 'checkpoints'}",
    ]


def test_a_step_on_stale_rollouts_is_named_and_its_probs_diff_not_held_against_the_weight_sync(tmp_path):
    # trainer.v1.trainer_mode=colocate_async trains a step on rollouts of the policy before: vLLM and the actor differ
    write_run(tmp_path, metrics={"training/rollout_probs_diff_max": 0.08, check_run.STALENESS: 1})
    lines, problems, _ = check_run.check(tmp_path, 1)
    assert problems == [] and any("rollouts up to 1 policy version(s) old" in line for line in lines)
    fresh = tmp_path / "fresh"
    write_run(fresh, metrics={"training/rollout_probs_diff_max": 0.08, check_run.STALENESS: 0})
    assert any("the weight sync did not reach" in problem for problem in check_run.check(fresh, 1)[1])


def test_a_trainer_that_logs_no_probs_diff_is_said_so_with_what_its_weight_sync_sent(tmp_path):
    # verl's experimental trainers train on the rollout's own log-probs and log no rollout/actor probs diff
    write_run(tmp_path, metrics={check_run.SENT: 21})
    data = json.loads((tmp_path / "metrics.jsonl").read_text())
    del data["data"][check_run.PROBS_DIFF]
    (tmp_path / "metrics.jsonl").write_text(json.dumps(data) + "\n")
    assert "verl logged no training/rollout_probs_diff_max" in check_run.check(tmp_path, 1)[1][0]  # V1 or legacy
    lines, problems, _ = check_run.check(tmp_path, 1, trainer="one_step_off")
    assert problems == []
    assert "rollout/actor probs diff" not in lines[0] and "weights sent over TCP: 21 tensors" in lines[0]
    assert "steps [1]: verl's trainer logged no rollout/actor probs diff" in lines[1]


def test_metrics_logged_under_the_next_weight_version_count_for_the_step_they_trained(tmp_path):
    # verl's fully asynchronous trainer: lines of its rollouter's timing alone under steps 0 and 1, then step 1's
    # training metrics under step 2 (its training/global_step says 1): read as step 1's, logged once
    write_run(tmp_path, metrics={file_logger.GLOBAL_STEP: 1})
    trained = json.loads((tmp_path / "metrics.jsonl").read_text())
    timing = [{"step": step, "data": {"fully_async/rollouter/active_time": 1.0}} for step in (0, 1, 2)]
    lines = [*timing[:2], {"step": 2, "data": trained["data"]}, timing[2]]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert check_run.check(tmp_path, 1)[1] == []
    assert check_run.step_metrics(tmp_path) == {1: trained["data"]}


def test_a_fully_async_step_that_lost_its_metrics_to_a_kill_is_accepted_only_where_the_run_resumed(tmp_path):
    # verl's fully asynchronous trainer logs a step's metrics during the next step: a run killed in step 2 never
    # logged step 1, and the run resumed from step 1's checkpoint does not train it again. Its record is there.
    write_run(tmp_path)
    (tmp_path / "metrics.jsonl").write_text("")
    lost = "step 1: not in"
    assert lost in check_run.check(tmp_path, 1, trainer="fully_async")[1][0]  # not resumed: a problem
    assert lost in check_run.check(tmp_path, 1, trainer="sync", resumed_from=1)[1][0]  # another trainer logs it
    lines, problems, _ = check_run.check(tmp_path, 1, trainer="fully_async", resumed_from=1)
    assert problems == []
    assert "step 1: recorded, not in verl's metrics: the run resumed from its checkpoint" in lines[0]
    (tmp_path / "gdpo" / "gdpo_steps.jsonl").write_text("")
    assert lost in check_run.check(tmp_path, 1, trainer="fully_async", resumed_from=1)[1][0]  # no record either
