"""A run's checkpoint directory is its own (checkpoint_owner) and its memory plan is made before Ray starts
(memory_plan): on verl's packaged config, composed by hydra as a launch composes it."""

import json

import pytest
from hydra import compose, initialize_config_module

from gdpo_verl.verl_adapter.checkpoint_owner import OWNER_FILE, check_checkpoint_owner, claim_checkpoint_dir
from gdpo_verl.verl_adapter.memory_plan import KNOWN_MODELS, memory_plan, print_memory_plan, shape_from_config


def composed(*overrides):
    with initialize_config_module("gdpo_verl.config", version_base=None):
        return compose("gdpo_trainer", overrides=list(overrides))


def run(directory, experiment="r1_7b_gdpo", project="gdpo_math_length", *more):
    return composed(f"trainer.default_local_dir={directory}", f"trainer.experiment_name={experiment}",
                    f"trainer.project_name={project}", *more)


def test_the_first_run_claims_its_directory_and_resumes_there(tmp_path):
    directory = tmp_path / "ckpt" / "run"
    config = run(directory)
    check_checkpoint_owner(config)  # not there yet
    claim_checkpoint_dir(config)
    assert json.loads((directory / OWNER_FILE).read_text()) == {"project": "gdpo_math_length",
                                                                 "experiment": "r1_7b_gdpo"}
    (directory / "global_step_50").mkdir()
    (directory / "latest_checkpointed_iteration.txt").write_text("50")
    check_checkpoint_owner(run(directory))  # the same run, resumed


@pytest.mark.parametrize(("project", "experiment"), [("gdpo_math_length", "r1_7b_grpo"), ("other", "r1_7b_gdpo")])
def test_another_run_is_refused_the_directory_naming_both(tmp_path, project, experiment):
    claim_checkpoint_dir(run(tmp_path))
    with pytest.raises(ValueError) as refused:
        check_checkpoint_owner(run(tmp_path, experiment, project))
    message = str(refused.value)
    assert "holds the checkpoints of another run (project 'gdpo_math_length', experiment 'r1_7b_gdpo'" in message
    assert f"this run is project {project!r}, experiment {experiment!r}" in message
    assert "another EXPERIMENT=..., or CHECKPOINT_DIR, a root" in message


def test_checkpoints_no_run_recorded_are_refused_with_the_line_that_adopts_them(tmp_path):
    (tmp_path / "global_step_10").mkdir()
    with pytest.raises(ValueError, match="holds checkpoints that no run recorded as its own") as refused:
        check_checkpoint_owner(run(tmp_path))
    assert OWNER_FILE in str(refused.value) and '"experiment": "r1_7b_gdpo"' in str(refused.value)


def test_an_unreadable_record_is_refused_not_passed_over(tmp_path):
    (tmp_path / OWNER_FILE).write_text("{not json")
    with pytest.raises(ValueError, match="does not say which run it belongs to"):
        check_checkpoint_owner(run(tmp_path))


def test_a_directory_that_cannot_be_created_is_refused_before_ray(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="cannot write there"):
        claim_checkpoint_dir(run(tmp_path / "file" / "run"))


GPU_RUN = ("actor_rollout_ref.model.path=deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "trainer.nnodes=1",
           "actor_rollout_ref.rollout.gpu_memory_utilization=0.7", "actor_rollout_ref.actor.use_kl_loss=True",
           "actor_rollout_ref.rollout.max_model_len=9024", "actor_rollout_ref.rollout.tensor_model_parallel_size=2")


def lines(plan):
    return "\n".join(plan.lines)


def test_a_7b_run_on_2_gpus_does_not_fit_an_80gb_card_and_on_4_it_does_narrowly(monkeypatch):
    monkeypatch.delenv("GPU_MEMORY_GB", raising=False)
    monkeypatch.delenv("GDPO_VERL_MEMORY_PLAN", raising=False)
    two = memory_plan(composed(*GPU_RUN, "trainer.n_gpus_per_node=2"))
    # 7.62e9 x 4 B / 2 of parameters, x 8 B / 2 of Adam's moments; vLLM's 0.7 x 79.2 GiB; verl frees the gradients
    # after the update and keeps the reference model on the CPU, so neither is counted
    assert "actor parameters (fp32)                14.2 GiB" in lines(two)
    assert "Adam's moments (fp32, after step 1)    28.4 GiB" in lines(two)
    assert "vLLM (gpu_memory_utilization 0.7)     55.4 GiB" in lines(two)
    assert "reference" not in lines(two)
    (problem,) = two.problems
    assert "it would run out of memory when vLLM wakes for step 2" in problem
    assert "OPTIMIZER_OFFLOAD=True" in problem and "NNODES x GPUS_PER_NODE = 4 fits" in problem
    with pytest.raises(ValueError, match="memory plan: the run needs 100.0 GiB per GPU and the card has 79.2"):
        print_memory_plan(composed(*GPU_RUN, "trainer.n_gpus_per_node=2"))
    four = memory_plan(composed(*GPU_RUN, "trainer.n_gpus_per_node=4"))
    assert four.problems == [] and "tight: 0.5 GiB to spare" in lines(four)
    offloaded = memory_plan(composed(*GPU_RUN, "trainer.n_gpus_per_node=2",
                                     "actor_rollout_ref.actor.fsdp_config.optimizer_offload=True"))
    assert offloaded.problems == [] and "Adam's moments (fp32, after step 1)     0.0 GiB offloaded" in lines(offloaded)


def test_a_plan_in_warn_mode_prints_its_problems_and_goes_on(monkeypatch, capsys):
    monkeypatch.setenv("GDPO_VERL_MEMORY_PLAN", "warn")
    print_memory_plan(composed(*GPU_RUN, "trainer.n_gpus_per_node=2"))
    assert "WARNING: gdpo-verl memory plan: the run needs 100.0 GiB" in capsys.readouterr().out
    monkeypatch.setenv("GDPO_VERL_MEMORY_PLAN", "ignore")
    with pytest.raises(ValueError, match="GDPO_VERL_MEMORY_PLAN='ignore': set refuse"):
        print_memory_plan(composed(*GPU_RUN))


def test_the_card_is_a_knob_and_a_bad_value_is_refused(monkeypatch):
    monkeypatch.setenv("GPU_MEMORY_GB", "40")
    assert memory_plan(composed(*GPU_RUN, "trainer.n_gpus_per_node=8")).problems  # 73 GiB needed of 39.6
    monkeypatch.setenv("GPU_MEMORY_GB", "eighty")
    with pytest.raises(ValueError, match="GPU_MEMORY_GB='eighty': set the memory of one GPU in GB"):
        memory_plan(composed(*GPU_RUN))


def test_vllm_sized_for_the_models_own_context_is_refused_where_one_sequence_does_not_fit(monkeypatch):
    monkeypatch.setenv("GPU_MEMORY_GB", "48")
    qwen3 = ("actor_rollout_ref.model.path=Qwen/Qwen3-4B-Instruct-2507", "trainer.n_gpus_per_node=8",
             "actor_rollout_ref.rollout.gpu_memory_utilization=0.6", "actor_rollout_ref.actor.use_kl_loss=True",
             "actor_rollout_ref.rollout.tensor_model_parallel_size=1")
    plan = memory_plan(composed(*qwen3))  # max_model_len unset: vLLM sizes for 262,144 tokens, 36 GiB of KV
    assert any("cannot hold one sequence of max_model_len=262144 tokens (36.0 GiB)" in p for p in plan.problems)
    assert memory_plan(composed(*qwen3, "actor_rollout_ref.rollout.max_model_len=9024")).problems == []


def test_a_local_models_size_comes_from_its_config(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({  # Qwen2.5-1.5B-Instruct's
        "hidden_size": 1536, "num_hidden_layers": 28, "vocab_size": 151936, "num_attention_heads": 12,
        "num_key_value_heads": 2, "intermediate_size": 8960, "tie_word_embeddings": True,
        "max_position_embeddings": 32768}))
    shape = shape_from_config(tmp_path / "config.json")
    assert abs(shape.parameters - KNOWN_MODELS["qwen2.5-1.5b-instruct"].parameters) / 1.54e9 < 0.01
    assert (shape.layers, shape.kv_heads, shape.head_dim, shape.context) == (28, 2, 128, 32768)


def test_no_plan_on_the_cpu_and_none_guessed_for_a_model_of_unknown_size():
    assert memory_plan(composed("trainer.device=cpu")) is None
    plan = memory_plan(composed("actor_rollout_ref.model.path=org/unknown-model"))
    assert plan.problems == [] and "none for 'org/unknown-model'" in lines(plan)


def test_a_local_config_of_another_layout_gives_no_plan_rather_than_an_error(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"text_config": {"hidden_size": 2560}, "model_type": "gemma3"}))
    plan = memory_plan(composed(f"actor_rollout_ref.model.path={tmp_path}"))
    assert plan.problems == [] and "none for" in lines(plan)
