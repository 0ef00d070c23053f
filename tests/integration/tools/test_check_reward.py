"""`gdpo-verl check-reward`: a reward called on a sample of the data before a GPU job, on the packaged kits' data (as
their data scripts write it), on the README's example reward, and on the mistakes it must stop: a misspelled key, a
reward that raises, a component constant in every group of the rollouts."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gdpo_verl.tools.cli import main
from tests.readme import readme_reward

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures"


def prepare(script: str, *arguments) -> None:
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / script), *map(str, arguments)],
                            capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.fixture(scope="module")
def math_data(tmp_path_factory):
    out = tmp_path_factory.mktemp("math")
    prepare("prepare_data.py", "--out", out, "--local", f"deepscaler={ROOT / 'gdpo_verl/data/cpu_training_math.jsonl'}")
    return out / "deepscaler_train.parquet"


def check_reward(capsys, *arguments) -> tuple[int, str]:
    code = main(["check-reward", *map(str, arguments)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_the_math_kit_on_its_data_returns_every_key_and_varies_in_correct(math_data, capsys):
    code, out = check_reward(capsys, "--path", "pkg://gdpo_verl.rewards.math_length", "--keys", "correct,length",
                             "--data", math_data, "--reward-kwargs", '{"think": "none"}', "--template", r"\boxed{{answer}}")
    assert code == 0, out
    assert "on 8 rows of" in out and "32 responses made from the data's answers" in out
    lines = out.splitlines()
    correct = next(line for line in lines if line.strip().startswith("correct"))
    assert correct.split()[1:] == ["0.00", "0.250", "0.00"]  # one right answer of four in every group
    assert "note: length is constant in every group" in out and out.rstrip().endswith("1 note(s) above)")


def test_the_tool_calling_kit_on_its_data(tmp_path, capsys):
    raw = tmp_path / "rlla_rl.json"  # the fixture's 10 rows, each 5 times distinct: ToolRL's 2% test split needs 50
    rows = json.loads((FIXTURES / "tool_calling" / "rlla_rl.json").read_text())
    raw.write_text(json.dumps([{**row, "input": f"{row['input']}\n<user> (variant {k}) </user>"}
                               for k in range(5) for row in rows]))
    prepare("prepare_tool_data.py", "--out", tmp_path, "--toolrl", raw)
    code, out = check_reward(capsys, "--path", "pkg://gdpo_verl.rewards.tool_calling", "--keys", "format,correct",
                             "--data", tmp_path / "train.parquet", "--template", "<think>ok</think>\n{answer}")
    assert code == 0, out
    assert "format" in out and "distinct advantages per group: GDPO" in out


@pytest.mark.skipif(sys.platform != "linux", reason="the coding reward's sandbox runs on Linux only")
def test_the_coding_kit_on_its_data_runs_each_made_up_program_in_its_sandbox(tmp_path, capsys):
    prepare("prepare_coding_data.py", "--out", tmp_path, "--eurus", FIXTURES / "coding" / "data")
    code, out = check_reward(capsys, "--path", "pkg://gdpo_verl.rewards.coding", "--keys", "pass_rate,length,no_bug",
                             "--data", tmp_path / "train.parquet", "--reward-kwargs", '{"wall_s": 4, "cpu_s": 2}',
                             "--template", "</think>\n```python\nprint({answer})\n```")
    assert code == 0, out
    assert " 0 raised" in out and "note: pass_rate is constant in every group" in out  # a gold is no program


def test_the_readmes_example_reward_checks_and_a_misspelled_key_is_refused_with_the_closest(math_data, tmp_path,
                                                                                          capsys):
    reward = tmp_path / "my_reward.py"
    reward.write_text(readme_reward())
    common = ("--path", reward, "--data", math_data, "--template", r"\boxed{{answer}}")
    code, out = check_reward(capsys, *common, "--keys", "correct,length")
    assert code == 0, out
    code, out = check_reward(capsys, *common, "--keys", "corect,length")
    assert code == 1
    assert ("--keys names 'corect', which compute_score does not declare it returns" in out
            and "(did you mean 'correct'?)" in out and "FAILED" in out)
    # the same reward without its declaration: the key is found missing in the calls' dicts
    reward.write_text(readme_reward().split("compute_score.needs")[0])
    code, out = check_reward(capsys, *common, "--keys", "correct,lenght")
    assert code == 1 and "it returned ['correct', 'length', 'score']. Did you mean 'length'?" in out


def test_a_reward_that_raises_is_named_with_its_row(math_data, tmp_path, capsys):
    reward = tmp_path / "raises.py"
    reward.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):\n"
                      "    if extra_info['index'] == 3:\n        raise KeyError('answer')\n"
                      "    return {'score': 1.0, 'correct': float(bool(solution_str))}\n")
    code, out = check_reward(capsys, "--path", reward, "--keys", "correct", "--data", math_data)
    assert code == 1
    assert "compute_score raised on 4 of 32 calls; first, on data row 3: KeyError: 'answer'" in out


def test_a_reward_that_raises_on_every_call_or_hangs_is_a_problem_with_its_cause(math_data, tmp_path, capsys):
    # the commonest first mistake: a reward_kwarg its signature does not take (every call raises)
    reward = tmp_path / "strict.py"
    reward.write_text("import time\n\ndef compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
                      "    return {'score': 0.0, 'correct': 0.0}\n\n"
                      "def hangs(data_source, solution_str, ground_truth, extra_info=None, **kwargs):\n"
                      "    time.sleep(30)\n")
    code, out = check_reward(capsys, "--path", reward, "--keys", "correct", "--data", math_data,
                             "--reward-kwargs", '{"max_length": 8}')
    assert code == 1
    assert "raised on 32 of 32 calls; first, on data row 0: TypeError: compute_score() got an unexpected keyword " \
           "argument 'max_length'" in out
    code, out = check_reward(capsys, "--path", reward, "--name", "hangs", "--keys", "correct", "--data", math_data,
                             "--timeout", "0.5")
    assert code == 1 and "compute_score did not return within 0.5 s on data row 0" in out


def test_a_component_constant_in_every_group_of_the_rollouts_is_a_problem(math_data, tmp_path, capsys):
    rollouts = tmp_path / "rollouts.jsonl"
    lines = [{"row": row, "response": text, "response_length": length}
             for row in range(8) for text, length in ((r"\boxed{5}", 3), (r"\boxed{7}", 9000))]
    rollouts.write_text("".join(json.dumps(line) + "\n" for line in lines))
    code, out = check_reward(capsys, "--path", "pkg://gdpo_verl.rewards.math_length", "--keys", "correct,length",
                             "--data", math_data, "--rollouts", rollouts, "--reward-kwargs", '{"think": "none"}')
    assert code == 1
    assert "correct is constant in every group" in out  # no rollout is right: correct is 0 everywhere
    assert "length is constant" not in out  # 3 and 9000 tokens: it varies


@pytest.mark.parametrize("arguments, message", [
    (["--rows", "0"], "--rows must be at least 1"),
    (["--weights", '{"correct": [[0, 1], [5, 2]]}'], "is a schedule"),
    (["--weights", '{"length": 1}'], "one weight for each of --keys"),
])
def test_bad_arguments_are_refused_before_any_call(math_data, capsys, arguments, message):
    with pytest.raises(SystemExit) as stopped:
        main(["check-reward", "--path", "pkg://gdpo_verl.rewards.math_length", "--keys", "correct",
              "--data", str(math_data), *arguments])
    assert stopped.value.code == 2 and message in capsys.readouterr().err
