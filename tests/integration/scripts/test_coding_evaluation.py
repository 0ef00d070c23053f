"""scripts/evaluate_coding.py on generations written here for the coding fixture's problems (no GPU, no vLLM): each
program runs on every test case in the local sandbox and the table reads like the paper's Table 5."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "fixtures" / "coding"

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap runs on Linux only")


def run(script, *arguments):
    return subprocess.run([sys.executable, str(ROOT / "scripts" / script), *map(str, arguments)],
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def problems(tmp_path_factory):
    out = tmp_path_factory.mktemp("coding")
    assert run("prepare_coding_data.py", "--out", out, "--eurus", FIXTURE).returncode == 0
    return pd.read_parquet(out / "train.parquet"), out


def fenced(program):
    return f"thinking</think>```python\n{program}\n```"


def write_generations(path, rows, responses):
    """One line per problem: ``responses(solution)`` gives its [(text, tokens)]."""
    solutions = json.loads((FIXTURE / "solutions.json").read_text())
    with open(path, "w") as handle:
        for row in rows.itertuples():
            solution = solutions[row.prompt[-1]["content"].split("\n\n")[0]]
            handle.write(json.dumps({
                "benchmark": row.data_source, "ground_truth": row.reward_model["ground_truth"],
                "responses": [{"text": text, "tokens": tokens} for text, tokens in responses(solution)],
            }) + "\n")
    return path


def mixed(solution):
    return [
        (fenced(solution), 100),             # passes, short
        (fenced(solution), 5000),            # passes, over the 4000-token budget: exceed
        (fenced("print(0)"), 100),           # wrong, clean (call-based: no such function, a bug)
        (fenced("1 / 0"), 100),              # raises: a bug
        ("thinking</think>no program", 100),  # no program: a bug, as in the bug reward
    ]


def test_pass_exceed_and_bug_per_benchmark_in_table_5_layout_with_published_columns(problems, tmp_path):
    rows, _ = problems
    ours = write_generations(tmp_path / "a.jsonl", rows, mixed)
    perfect = write_generations(tmp_path / "b.jsonl", rows, lambda solution: [(fenced(solution), 10)] * 2)
    paper = tmp_path / "paper.json"
    paper.write_text(json.dumps({"published": {"apps": [50, 1.5, 10], "taco": [40, 2, 20.25]}}))
    result = run("evaluate_coding.py", "--generations", ours, perfect, "--labels", "GRPO,GDPO", "--out", tmp_path / "out",
                 "--wall-s", 5, "--paper", paper)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "| | GRPO | GDPO | published |"
    assert lines[2:6] == [
        "| Apps | 40.0 / 20.0 / 40.0 | 100.0 / 0.0 / 0.0 | 50.0 / 1.5 / 10.0 |",
        "| CodeContests | 40.0 / 20.0 / 40.0 | 100.0 / 0.0 / 0.0 | - |",
        "| Codeforces | 40.0 / 20.0 / 40.0 | 100.0 / 0.0 / 0.0 | - |",
        "| Taco | 40.0 / 20.0 / 60.0 | 100.0 / 0.0 / 0.0 | 40.0 / 2.0 / 20.2 |",
    ]
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    apps = saved["results"]["GRPO"]["apps"]
    assert (apps["questions"], apps["responses"], apps["judged"], apps["no_code"], apps["verify_failed"]) == (1, 5, 5, 20.0, 0)
    assert (tmp_path / "out" / "results.md").read_text() == result.stdout.rstrip("\n") + "\n"


def test_responses_the_sandbox_could_not_judge_are_counted_apart_never_scored(problems, tmp_path):
    rows, _ = problems
    ours = write_generations(tmp_path / "a.jsonl", rows.head(1), mixed)
    # a Sandbox Fusion server that went away after its check: every run is unavailable
    from tests.fusion_server import FusionServer

    with FusionServer() as server:
        server.faults.extend([{"status": "SandboxError", "message": "no executor"}] * 100)
        server.faults.appendleft({"status": "Success", "message": "", "run_result": {
            "status": "Finished", "return_code": 0, "stdout": "1\n", "stderr": ""}})  # the start-up check passes
        result = run("evaluate_coding.py", "--generations", ours, "--out", tmp_path / "out", "--sandbox", "fusion",
                     "--sandbox-fusion-url", server.url)
    assert result.returncode == 0, result.stderr
    # the four programs were not judged; the response without a program needs no sandbox: judged, a bug
    assert "| Apps | 0.0 / 20.0 / 100.0 |" in result.stdout
    assert json.loads((tmp_path / "out" / "results.json").read_text())["results"]["ours"]["apps"]["judged"] == 1
    assert "not judged (the checker failed; left out of pass and bug, see results.json): ours: 4" in result.stdout


@pytest.mark.parametrize(
    ("arguments", "code", "message"),
    [
        (["--sandbox", "fusion"], 2, "--sandbox fusion and --sandbox-fusion-url go together"),
        (["--labels", "A,B"], 2, "--labels needs one distinct label per generations file"),
        (["--paper", "PAPER"], 2, "column 'x' must map benchmarks to [pass, exceed, bug] numbers"),
        (["--max-length", "0"], 2, "max_length (tokens) must be"),
        (["--sandbox", "none", "--memory-mb", "1"], 3, "sandbox on node"),
    ],
)
def test_bad_arguments_or_a_sandbox_that_cannot_run_exit_with_the_reason(problems, tmp_path, arguments, code, message):
    rows, _ = problems
    generations = write_generations(tmp_path / "a.jsonl", rows.head(1), lambda solution: [(fenced(solution), 1)])
    (tmp_path / "paper.json").write_text(json.dumps({"x": {"apps": [1, 2]}}))
    arguments = [str(tmp_path / "paper.json") if a == "PAPER" else a for a in arguments]
    result = run("evaluate_coding.py", "--generations", generations, "--out", tmp_path / "out", *arguments)
    assert result.returncode == code and message in result.stderr, result.stderr


def test_generating_without_vllm_says_how_to_get_it(problems, tmp_path):
    _, out = problems
    result = run("evaluate_coding.py", "--model", tmp_path / "model", "--data", out / "validation.parquet",
                 "--out", tmp_path / "out")
    assert result.returncode == 2 and "vLLM is needed for generation" in result.stderr
