"""scripts/prepare_data.py and scripts/evaluate.py on fixture files (no hub, no GPU, no vLLM)."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "math"


def script(name, *arguments):
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / name), *map(str, arguments)], capture_output=True, text=True, timeout=600
    )


def test_prepare_data_writes_verl_parquet_and_reports_skipped_rows(tmp_path):
    parquet = tmp_path / "aime.parquet"
    pd.DataFrame(json.loads((FIXTURES / "aime24.json").read_text())["data"]).to_parquet(parquet)
    result = script(
        "prepare_data.py", "--out", tmp_path / "out",
        "--local", f"deepscaler={FIXTURES / 'deepscaler.jsonl'}", "--local", f"aime24={parquet}",
        "--local", f"olympiadbench={FIXTURES / 'olympiadbench.jsonl'}", "--local", f"math500={FIXTURES / 'math500.jsonl'}",
    )
    assert result.returncode == 0, result.stderr
    assert "deepscaler: 8 rows read, 4 written" in result.stdout
    assert "4 removed (1 duplicate question, 1 no question" in result.stdout and "1 not a JSON object" in result.stdout

    train = pd.read_parquet(tmp_path / "out" / "deepscaler_train.parquet")
    assert list(train.columns) == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    first = train.iloc[0]
    assert first.data_source == "deepscaler" and first.ability == "math"
    assert list(first.prompt) == [{"role": "user", "content": "What is $2+2$? Let's think step by step and output "
                                   "the final answer within \\boxed{}."}]
    assert first.reward_model == {"style": "rule", "ground_truth": "4"}
    assert first.extra_info["split"] == "train"
    assert train.reward_model.map(lambda rm: rm["ground_truth"]).tolist() == ["4", "\\frac{3}{4}", "4", "4"]
    olympiad = pd.read_parquet(tmp_path / "out" / "olympiadbench.parquet")
    assert olympiad.reward_model[0]["ground_truth"] == "2"  # from the list ["$2$"]
    assert olympiad.extra_info[0]["split"] == "test"
    # several final answers: every part, in order; a repeated question is kept (evaluation sets stay as published)
    assert olympiad.reward_model[1]["ground_truth"] == '{"all_of": ["2", "3"]}' == olympiad.reward_model[2]["ground_truth"]
    assert "olympiadbench: 4 rows read, 3 written" in result.stdout
    assert "2 multi-part answer (all parts required, in order); 1 removed (1 no usable answer" in result.stdout
    math500 = pd.read_parquet(tmp_path / "out" / "math500.parquet")
    assert math500.reward_model[0]["ground_truth"] == "2\\sqrt{2}"  # the boxed answer of the solution


def test_prepare_data_writes_float_answers_in_digits_and_skips_nan_or_infinite_ones(tmp_path):
    # Before: 5e-05 was written as "5e-05" (math-verify reads 5e - 5: every correct answer wrong) and a NaN
    # answer as "nan", a question nothing could answer.
    rows = [{"problem": f"Question {n}?", "answer": answer}
            for n, answer in enumerate([5e-05, 1e16, 2.0, 0.1, float("nan"), float("inf"), "nan", "1\\,000"])]
    lines = tmp_path / "aime.jsonl"  # Python's json writes NaN and Infinity, as pandas' exports do
    lines.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = script("prepare_data.py", "--out", tmp_path / "out", "--local", f"aime24={lines}", "--only", "aime24")
    assert result.returncode == 0, result.stderr
    truths = pd.read_parquet(tmp_path / "out" / "aime24.parquet").reward_model.map(lambda rm: rm["ground_truth"])
    assert truths.tolist() == ["0.00005", "10000000000000000", "2", "0.1", "1000"]
    assert "aime24: 8 rows read, 5 written" in result.stdout and "3 no usable answer" in result.stdout


def test_prepare_data_leaves_out_a_gold_the_math_reward_cannot_read_naming_the_row(tmp_path):
    # A gold the reader cannot place (vectors it has no reading for, text holding a value) could never be scored:
    # the row is named and left out, and every gold written is one the reward reads
    golds = ["4", "\\langle 1, 2 \\rangle", "2, 3", "5 \\text{ (or 7)}", "\\pm 2", "[3, \\infty)", "C"]
    lines = tmp_path / "deepscaler.jsonl"
    lines.write_text("".join(json.dumps({"problem": f"Question {n}?", "answer": gold}) + "\n"
                             for n, gold in enumerate(golds)))
    result = script("prepare_data.py", "--out", tmp_path / "out", "--local", f"deepscaler={lines}")
    assert result.returncode == 0, result.stderr
    assert "deepscaler: 7 rows read, 5 written" in result.stdout
    assert "2 a gold answer the math reward cannot read" in result.stdout
    assert "deepscaler row 2: the gold answer '\\\\langle 1, 2 \\\\rangle' cannot be read as values" in result.stderr
    assert "deepscaler row 4: the gold answer '5 \\\\text{ (or 7)}' cannot be read as values" in result.stderr
    truths = pd.read_parquet(tmp_path / "out" / "deepscaler_train.parquet").reward_model.map(lambda rm: rm["ground_truth"])
    assert truths.tolist() == ["4", "2, 3", "\\pm 2", "[3, \\infty)", "C"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--local", "gsm8k=x.jsonl"], "expected NAME=PATH with NAME one of"),
        (["--local", "aime24=/no/such.jsonl"], "no such file"),
        (["--local", f"aime24={FIXTURES / 'generations.jsonl'}"], "no usable rows"),
        (["--local", f"aime24={ROOT / 'README.md'}"], "expected a .json, .jsonl or .parquet file"),
        (["--only", "gsm8k"], "unknown datasets"),
    ],
)
def test_prepare_data_bad_inputs_exit_2(tmp_path, arguments, message):
    result = script("prepare_data.py", "--out", tmp_path, *arguments)
    assert result.returncode == 2
    assert message in result.stderr


def test_evaluate_scores_generations_like_table_3_with_the_papers_numbers(tmp_path):
    result = script("evaluate.py", "--generations", FIXTURES / "generations.jsonl", "--out", tmp_path,
                    "--paper", "r1_1.5b_gdpo", "--timeout-s", "2")
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "results.json").read_text())
    aime = summary["results"]["aime24"]
    # question 0: 2 of 4 correct (one cut off inside its reasoning); question 1: 3 of 4 (226/2 counts)
    assert aime["accuracy"] == pytest.approx(62.5)
    assert aime["exceed"] == pytest.approx(37.5)  # 9000, 32768 and 4001 tokens; 4000 is within the budget
    math500 = summary["results"]["math500"]
    assert (math500["accuracy"], math500["verify_failed"]) == (50.0, 1)  # the tower of powers scores 0, counted
    table = (tmp_path / "results.md").read_text()
    assert "| MATH | 50.0 / 0.0 | 86.2 / 0.8 |" in table and "| AIME | 62.5 / 37.5 | 29.4 / 6.5 |" in table
    assert summary["paper"]["aime24"] == [29.4, 6.5]
    # the training reward's check on every kind of ground truth: all parts in order; any alternative
    assert summary["results"]["olympiadbench"]["accuracy"] == 50.0
    assert summary["results"]["amc"]["accuracy"] == 100.0


def test_evaluate_without_vllm_says_how_to_get_it(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    pd.DataFrame([{"prompt": [{"role": "user", "content": "1+1?"}], "reward_model": {"ground_truth": "2"}}]).to_parquet(
        data / "aime24.parquet"
    )
    result = script("evaluate.py", "--model", tmp_path / "model", "--data-dir", data, "--benchmarks", "aime24",
                    "--out", tmp_path / "out")
    assert result.returncode == 2
    assert "vLLM is needed for generation" in result.stderr and "--generations FILE" in result.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"benchmark": "aime24", "responses": []}\n', "missing ['ground_truth']"),
        ('{"benchmark": "aime24", "ground_truth": "1", "responses": [{"text": "x"}]}\n', "non-negative integer tokens"),
        ("not json\n", "not valid JSON"),
    ],
)
def test_evaluate_bad_generations_exit_2(tmp_path, content, message):
    path = tmp_path / "generations.jsonl"
    path.write_text(content)
    result = script("evaluate.py", "--generations", path, "--out", tmp_path / "out")
    assert result.returncode == 2
    assert message in result.stderr


def test_evaluate_refuses_a_generations_line_that_is_not_an_object(tmp_path):
    bad = tmp_path / "generations.jsonl"
    bad.write_text("3\n")
    result = script("evaluate.py", "--generations", bad, "--out", tmp_path)
    assert result.returncode == 2 and ":1: expected a JSON object (one question)" in result.stderr
