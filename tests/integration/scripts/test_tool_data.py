"""scripts/prepare_tool_data.py on a fixture in ToolRL's format (tests/fixtures/tool_calling/rlla_rl.json, written
for the tests in the layout of ToolRL's dataset/rlla_4k_raw/rlla_rl.json) and on ToolRL's own verl parquet layout;
the rows it writes score their own ground truth as perfect with gdpo_verl.rewards.tool_calling."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from gdpo_verl.rewards.tool_calling import compute_score

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "fixtures" / "tool_calling" / "rlla_rl.json"


def prepare(*arguments):
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "prepare_tool_data.py"), *map(str, arguments)],
        capture_output=True, text=True, timeout=300,
    )


def raw_rows(copies=5):
    rows = json.loads(FIXTURE.read_text())
    # 50 rows, each distinct, so that ToolRL's 2% split leaves one for test
    return [{**row, "input": f"{row['input']}\n<user> (variant {k}) </user>"} for k in range(copies) for row in rows]


def test_raw_toolrl_rows_are_split_as_toolrl_splits_them_and_written_in_verl_layout(tmp_path):
    raw = tmp_path / "rlla_rl.json"
    rows = raw_rows()
    raw.write_text(json.dumps(rows))
    result = prepare("--out", tmp_path / "out", "--toolrl", raw)
    assert result.returncode == 0, result.stderr
    assert "train: 49 rows written" in result.stdout and "test: 1 rows written" in result.stdout
    assert "train: tool call only" in result.stdout and "train: response only" in result.stdout

    # ToolRL's rlla.py: np.random.seed(31415); np.random.shuffle(dataset); the last 2% are the test rows
    expected = list(rows)
    np.random.seed(31415)
    np.random.shuffle(expected)
    test = pd.read_parquet(tmp_path / "out" / "test.parquet")
    assert test.iloc[0].prompt[1]["content"] == expected[-1]["input"]

    train = pd.read_parquet(tmp_path / "out" / "train.parquet")
    assert list(train.columns) == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    first = train.iloc[0]
    assert first.data_source == "toolrl" and first.ability == "tool_calling"
    assert [turn["role"] for turn in first.prompt] == ["system", "user"]
    assert first.prompt[0]["content"] == expected[0]["instruction"]
    assert first.reward_model == {"style": "rule", "ground_truth": expected[0]["output"]}
    assert first.extra_info["split"] == "train" and len(first.extra_info["tools"]) >= 1
    # each listed tool's declared parameter types, read from its "Parameters:" line
    declared = {json.loads(row.extra_info["parameter_types"]).get("search_books", {}).get("limit")
                for row in train.itertuples()}
    assert declared == {"int", None}


def test_a_written_rows_values_are_compared_by_the_types_its_tools_declare(tmp_path):
    raw = tmp_path / "rlla_rl.json"
    raw.write_text(json.dumps(raw_rows()))
    assert prepare("--out", tmp_path, "--toolrl", raw).returncode == 0
    rows = [row for row in pd.read_parquet(tmp_path / "train.parquet").itertuples()
            if '"convert_currency"' in row.reward_model["ground_truth"]
            or '"search_books"' in row.reward_model["ground_truth"]]
    assert {"convert_currency", "search_books"} <= {json.loads(row.extra_info["expected"])["tool_calls"][0]["name"]
                                                   for row in rows}

    def exact(row, declared=True, **given):
        call = json.loads(row.extra_info["expected"])["tool_calls"][0]
        call = {**call, "parameters": {**call["parameters"], **given}}
        response = "<think>a</think>\n<tool_call>\n" + json.dumps(call) + "\n</tool_call>"
        extra_info = dict(row.extra_info) if declared else {}
        return compute_score(row.data_source, response, row.reward_model["ground_truth"], extra_info)["exact_match"]

    for row in rows:
        if '"convert_currency"' in row.reward_model["ground_truth"]:
            # "amount" is declared float, its gold 250: 250.0 answers it, which it would not without the declaration
            assert exact(row, amount=250.0) == exact(row, amount=250) == 1.0
            assert exact(row, declared=False, amount=250.0) == 0.0
        else:
            # "limit" is declared int: 3.0 is not 3
            limit = json.loads(row.extra_info["expected"])["tool_calls"][0]["parameters"]["limit"]
            assert exact(row, limit=float(limit)) == 0.0 and exact(row, limit=limit) == 1.0


def test_every_written_row_scores_its_own_ground_truth_as_perfect_in_both_forms(tmp_path):
    raw = tmp_path / "rlla_rl.json"
    raw.write_text(json.dumps(raw_rows()))
    assert prepare("--out", tmp_path, "--toolrl", raw).returncode == 0
    for row in pd.read_parquet(tmp_path / "train.parquet").itertuples():
        truth = row.reward_model["ground_truth"]
        from_string = compute_score(row.data_source, truth, truth, dict(row.extra_info))
        from_structured = compute_score(row.data_source, truth, row.extra_info["expected"], dict(row.extra_info))
        assert from_string == from_structured
        assert from_string["format"] == 1.0 and from_string["exact_match"] == 1.0
        assert from_string["correct"] == (3.0 if from_string["tool_call_expected"] else 0.0)


def test_toolrl_s_own_rlla_4k_folder_is_read_as_split(tmp_path):
    folder = tmp_path / "rlla_4k"
    folder.mkdir()
    rows = json.loads(FIXTURE.read_text())

    def toolrl_layout(row, index, split):  # as ToolRL's dataset/rlla_4k_raw/rlla.py writes its parquet
        return {"data_source": "rlla",
                "prompt": [{"role": "system", "content": row["instruction"]}, {"role": "user", "content": row["input"]}],
                "ability": "math", "reward_model": {"style": "rule", "ground_truth": row["output"]},
                "extra_info": {"split": split, "index": index, "instruction": row["instruction"],
                               "input": row["input"], "output": row["output"]}}

    pd.DataFrame([toolrl_layout(row, i, "train") for i, row in enumerate(rows[:8])]).to_parquet(folder / "train.parquet")
    pd.DataFrame([toolrl_layout(row, i, "test") for i, row in enumerate(rows[8:])]).to_parquet(folder / "test.parquet")
    result = prepare("--out", tmp_path / "out", "--toolrl", folder)
    assert result.returncode == 0, result.stderr
    assert "train: 8 rows written" in result.stdout and "test: 2 rows written" in result.stdout
    test = pd.read_parquet(tmp_path / "out" / "test.parquet")
    assert test.iloc[1].reward_model["ground_truth"] == rows[9]["output"]


def test_a_malformed_row_stops_the_script_naming_its_row_unless_skipped(tmp_path):
    rows = raw_rows()
    rows[3] = {**rows[3], "output": "<think> x </think>\n<tool_call>\n{\"name\": \"get_time\"\n</tool_call>"}
    rows[7] = {**rows[7], "input": None}
    raw = tmp_path / "rlla_rl.json"
    raw.write_text(json.dumps(rows))
    stopped = prepare("--out", tmp_path / "a", "--toolrl", raw)
    assert stopped.returncode == 2
    assert "row" in stopped.stderr and "--skip-bad-rows" in stopped.stderr
    assert not (tmp_path / "a" / "train.parquet").exists()

    skipped = prepare("--out", tmp_path / "b", "--toolrl", raw, "--skip-bad-rows")
    assert skipped.returncode == 0, skipped.stderr
    assert "skipped, output does not parse" in skipped.stdout and "skipped, input missing or not text" in skipped.stdout
    written = len(pd.read_parquet(tmp_path / "b" / "train.parquet")) + len(pd.read_parquet(tmp_path / "b" / "test.parquet"))
    assert written == 48


def test_bad_inputs_are_refused_with_exit_code_2(tmp_path):
    too_few = tmp_path / "few.json"
    too_few.write_text(FIXTURE.read_text())  # 10 rows: 2% of them is no test row
    result = prepare("--out", tmp_path, "--toolrl", too_few)
    assert result.returncode == 2 and "too few to split" in result.stderr
    result = prepare("--out", tmp_path, "--toolrl", tmp_path / "missing.json")
    assert result.returncode == 2 and "no such file" in result.stderr
    empty_folder = tmp_path / "rlla_4k"
    empty_folder.mkdir()
    result = prepare("--out", tmp_path, "--toolrl", empty_folder)
    assert result.returncode == 2 and "train.parquet and test.parquet" in result.stderr


def evaluate(*arguments):
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "evaluate_tool_calling.py"), *map(str, arguments)],
        capture_output=True, text=True, timeout=300,
    )


def test_evaluation_scores_saved_generations_of_several_runs_side_by_side(tmp_path):
    rows = json.loads(FIXTURE.read_text())

    def generations(name, answer):
        records = [{"benchmark": "toolrl_test", "index": i, "ground_truth": row["output"],
                    "responses": [{"text": answer(row), "tokens": 10}]} for i, row in enumerate(rows)]
        path = tmp_path / name / "generations.jsonl"
        path.parent.mkdir()
        path.write_text("".join(json.dumps(record) + "\n" for record in records))
        return path

    perfect = generations("perfect", lambda row: row["output"])
    silent = generations("silent", lambda row: "<think> no idea </think>\n<response> I cannot help. </response>")
    result = evaluate("--generations", perfect, silent, "--labels", "A,B", "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert saved["A"] == {"questions": 10, "responses": 10, "format": 100.0, "correct": 2.1, "exact": 100.0, "parsed": 100.0}
    # B never calls a tool: format only where a plain response was expected (3 of 10), -3 on the 7 that needed a
    # call, the right decision on the 3 that needed none
    assert saved["B"]["format"] == 30.0 and saved["B"]["correct"] == -2.1 and saved["B"]["exact"] == 30.0
    assert saved["B"]["parsed"] == 0.0
    assert "| correct format (%) | 100.0 | 30.0 |" in result.stdout


def test_evaluation_refuses_bad_arguments_with_exit_code_2(tmp_path):
    result = evaluate("--model", "some/model", "--out", tmp_path)
    assert result.returncode == 2 and "--model needs --data-dir" in result.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"benchmark": "toolrl_test"}\n')
    result = evaluate("--generations", bad, "--out", tmp_path)
    assert result.returncode == 2 and "missing" in result.stderr
    result = evaluate("--generations", bad, bad, "--labels", "one", "--out", tmp_path)
    assert result.returncode == 2 and "one distinct label per generations file" in result.stderr
