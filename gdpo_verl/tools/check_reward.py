"""``gdpo-verl check-reward``: a reward function called on a sample of the data, on the CPU, without a trainer,
before a GPU job: does it return every reward key, does each component vary within a prompt's responses, how many
distinct advantages GDPO and GRPO keep, what it raises and how long a call takes.

The reward is loaded as verl loads it (``reward.custom_reward_function.path`` and ``.name``: a file or
``pkg://<module>``), with the reward_kwargs of the config; a reward that keeps state (``compute_score.reward_class``:
gdpo-verl's math checkers, coding sandboxes) gets an instance of its own, as the ``gdpo_verl`` reward manager
gives it. ``extra_info`` carries ``response_length``, as that manager passes it.

The responses: the user's rollouts (``--rollouts``: JSON Lines, the format ``gdpo-verl demo --rollouts`` reads,
each line with the ``response`` text and the data ``row`` it answers), or, without them, made from the data's own
answers: per row its own gold answer, the golds of other rows (wrong answers) and an empty response, each written
with ``--template`` (the literal ``{answer}`` replaced). Made-up responses differ in their answer only, so a
component constant over them (a length reward) is said, not counted a problem; over rollouts it is one.

Exit 0: nothing that would stop or spoil the run; 1: problems, each named; 2: bad arguments or inputs.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gdpo_verl.core.advantage import gdpo_parts
from gdpo_verl.core.checks import did_you_mean, is_reward_value, shown
from gdpo_verl.core.diagnostics import advantage_metrics
from gdpo_verl.records.jsonl import iter_jsonl, regular_file
from gdpo_verl.verl_adapter.components import TOKEN_LEVEL_PREFIX, find_reward, missing_component
from gdpo_verl.verl_adapter.reward_config import declared_needs, load_reward_function

TEMPLATE = "{answer}"
# the most rows and calls a check takes: enough to see a reward's behaviour, few enough for seconds to minutes
MAX_ROWS = 10_000


@dataclass
class Response:
    row: int  # the data row it answers (its group)
    text: str
    length: int  # tokens (or words, without a tokenizer)


@dataclass
class Report:
    calls: int = 0
    seconds: list[float] = field(default_factory=list)
    raised: list[tuple[int, str]] = field(default_factory=list)  # (data row, exception)
    results: list[dict | None] = field(default_factory=list)  # per response; None where the call raised
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def read_data(path: Path, limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` rows of a verl data file (parquet, or JSON Lines), as the data scripts write them:
    ``data_source``, ``reward_model.ground_truth``, ``extra_info``. Only those are read."""
    regular_file(path)
    rows: list[dict[str, Any]] = []
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(path).iter_batches(batch_size=min(limit, 1024)):
            rows += [_plain(row) for row in batch.to_pylist()[:limit - len(rows)]]
            if len(rows) >= limit:
                break
    else:
        for number, row in iter_jsonl(path):
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{number}: expected a JSON object (one data row); got {shown(row)}.")
            rows.append(row)
            if len(rows) >= limit:
                break
    for number, row in enumerate(rows):
        model = row.get("reward_model")
        if not isinstance(model, dict) or "ground_truth" not in model or "data_source" not in row:
            raise ValueError(f"{path}: row {number} has no data_source or reward_model.ground_truth: not a row of verl's "
                             "data (scripts/prepare_data.py and the other data scripts write them).")
    if not rows:
        raise ValueError(f"{path}: no rows.")
    return rows


def _plain(value: Any) -> Any:
    """A parquet value as verl's dataset hands it on (numpy arrays as lists)."""
    if isinstance(value, np.ndarray):
        return [_plain(item) for item in value.tolist()]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def made_responses(rows: list[dict], template: str, group: int, count: Any) -> list[Response]:
    """Per row: its gold answer, ``group - 2`` other rows' golds and an empty response, each written with ``template``."""
    golds = [str(row["reward_model"]["ground_truth"]) for row in rows]
    responses = []
    for number, gold in enumerate(golds):
        others = [other for other in dict.fromkeys(golds) if other != gold][:max(group - 2, 0)]
        for answer in (gold, *others):
            text = template.replace("{answer}", answer)
            responses.append(Response(number, text, count(text)))
        responses.append(Response(number, "", 0))
    return responses


def read_rollouts(path: Path, rows: int, count: Any) -> list[Response]:
    """``--rollouts``: one JSON line per response with ``row`` (the data row, from 0) and ``response`` (its text);
    ``response_length`` (tokens) when known, else counted."""
    responses = []
    for number, line in iter_jsonl(path):
        where = f"{path}:{number}"
        if not isinstance(line, dict) or not isinstance(line.get("response"), str):
            raise ValueError(f"{where}: expected a JSON object with the response's text under \"response\".")
        row = line.get("row")
        if isinstance(row, bool) or not isinstance(row, int) or not 0 <= row < rows:
            raise ValueError(f"{where}: \"row\" must be the data row the response answers, from 0 to {rows - 1}; got "
                             f"{shown(row)}.")
        length = line.get("response_length", None)
        if length is None:
            length = count(line["response"])
        elif isinstance(length, bool) or not isinstance(length, int) or length < 0:
            raise ValueError(f"{where}: response_length must be a whole number of tokens; got {shown(length)}.")
        responses.append(Response(row, line["response"], length))
    if not responses:
        raise ValueError(f"{path}: no rollouts.")
    return responses


def token_counter(tokenizer: str | None) -> Any:
    """Tokens of a text by the model's tokenizer (a local directory), else its whitespace-separated words."""
    if tokenizer is None:
        return lambda text: len(text.split())
    from transformers import AutoTokenizer

    loaded = AutoTokenizer.from_pretrained(tokenizer, local_files_only=True)
    return lambda text: len(loaded.encode(text, add_special_tokens=False))


def scorer(path: str, name: str, reward_kwargs: dict) -> tuple[Any, Any, Any]:
    """(the call, the reward's declaration, a close function): the reward as the ``gdpo_verl`` manager calls it."""
    function = load_reward_function(path, name)
    needs = declared_needs(function, path)
    reward_class = getattr(function, "reward_class", None)
    if reward_class is None:
        return function, needs, lambda: None
    reward = reward_class()
    prepare = getattr(reward, "prepare", None)
    if prepare is not None:
        prepare(**reward_kwargs)
    return reward, needs, getattr(reward, "close", lambda: None)


def call(function: Any, row: dict, response: Response, kwargs: dict, timeout_s: float) -> tuple[Any, float]:
    """One call, as verl's manager makes it, bounded by ``timeout_s`` (a call still running then is a problem; its
    thread is left to the process's exit)."""
    extra_info = {**(row.get("extra_info") or {}), "response_length": response.length}
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(function(data_source=row["data_source"], solution_str=response.text,
                                    ground_truth=row["reward_model"]["ground_truth"], extra_info=extra_info, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - reported with its row (SystemExit too), counted a problem
            outcome.append(exc)

    started = time.perf_counter()
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        return None, time.perf_counter() - started
    return outcome[0], time.perf_counter() - started


def check(rows: list[dict], responses: list[Response], function: Any, kwargs: dict, keys: list[str],
          timeout_s: float) -> Report:
    report = Report()
    for response in responses:
        result, seconds = call(function, rows[response.row], response, kwargs, timeout_s)
        report.calls += 1
        report.seconds.append(seconds)
        if result is None and seconds >= timeout_s:  # still running: a run's step would fail on it; no more calls
            report.problems.append(f"compute_score did not return within {timeout_s:g} s on data row {response.row} "
                                   f"(response {response.text[:60]!r}): a reward must bound its own work (the "
                                   "gdpo_verl reward manager fails the step past algorithm.gdpo.reward_timeout_s).")
            report.results.append(None)
            break
        if isinstance(result, BaseException):
            report.raised.append((response.row, f"{type(result).__name__}: {result}"))
            report.results.append(None)
            continue
        if not isinstance(result, dict) or "score" not in result:
            report.problems.append(f"data row {response.row}: compute_score returned {shown(result)}; GDPO needs a dict "
                                   "with 'score' and one entry per component.")
            report.results.append(None)
            continue
        report.results.append(result)
    return report


def components(report: Report, keys: list[str]) -> tuple[dict, dict]:
    """(key -> ``(B,)`` outcome scores, key -> ``(B,)`` where it applies) over the calls that returned; problems
    (a key left out, a value that is no finite number) go to the report."""
    returned = [result for result in report.results if result is not None]
    values: dict[str, list[float]] = {key: [] for key in keys}
    applies: dict[str, list[bool]] = {key: [] for key in keys}
    for result in returned:
        for key in keys:
            found, token_level = find_reward(key, result)
            if found is None:
                report.problems.append(missing_component(key, result, keys))
                return {}, {}
            value = result[found]
            if value is not None and token_level:
                value = float(np.sum(np.asarray(value, dtype=np.float64)))
            if value is not None and (isinstance(value, bool) or not is_reward_value(value)):
                report.problems.append(f"compute_score returned {key}={shown(value)}; GDPO needs a finite number (or "
                                       "None where the component does not apply).")
                return {}, {}
            values[key].append(0.0 if value is None else float(value))
            applies[key].append(value is not None)
    return ({key: torch.tensor(column, dtype=torch.float64) for key, column in values.items()},
            {key: torch.tensor(column, dtype=torch.bool) for key, column in applies.items()})


def summarize(report: Report, responses: list[Response], keys: list[str], weights: dict | None,
              from_rollouts: bool) -> dict[str, float]:
    """The ``gdpo/`` metrics training would log for these responses (the same computation), problems added."""
    if report.raised:
        row, error = report.raised[0]
        report.problems.append(f"compute_score raised on {len(report.raised)} of {report.calls} calls; first, on data "
                               f"row {row}: {error}")
    if not any(result is not None for result in report.results):
        return {}
    rewards, applies = components(report, keys)
    if not rewards:
        return {}
    kept = [response for response, result in zip(responses[:len(report.results)], report.results, strict=True)
            if result is not None]
    index = np.array([f"row-{response.row}" for response in kept], dtype=object)
    mask = torch.ones(len(kept), 1)
    options = {"batch_norm": "none"} if len(kept) < 2 else {}
    parts = gdpo_parts(rewards, mask, index, weights, applies=applies, **options)
    metrics = advantage_metrics(parts)
    for key in keys:
        if metrics.get(f"gdpo/{key}/applies_frac", 1.0) == 0:
            report.problems.append(f"{key} is None for every response: it applies to none, and gives GDPO nothing.")
        elif metrics[f"gdpo/{key}/zero_var_group_frac"] == 1:
            what = f"{key} is constant in every group (every response of a prompt gets the same value): GDPO gets no " \
                   "signal from it"
            if from_rollouts:
                report.problems.append(f"{what}.")
            else:
                report.notes.append(f"{what} here; these made-up responses differ in their answer only, so check it "
                                    "on your model's rollouts (--rollouts).")
    if all(metrics[f"gdpo/{key}/zero_var_group_frac"] == 1 for key in keys) and from_rollouts:
        report.problems.append("every component is constant in every group: every GDPO advantage would be 0.")
    return metrics


def table(report: Report, keys: list[str], metrics: dict[str, float]) -> list[str]:
    milliseconds = np.asarray(report.seconds) * 1000
    lines = [f"calls: {report.calls}, {len(report.raised)} raised, {milliseconds.mean():.1f} ms each (max "
             f"{milliseconds.max():.1f} ms)"]
    if metrics:
        lines.append(f"{'component':<20} {'None':>6} {'mean':>8} {'constant groups':>16}")
        for key in keys:
            applies = metrics.get(f"gdpo/{key}/applies_frac", 1.0)
            lines.append(f"{key:<20} {1 - applies:>6.2f} {metrics[f'gdpo/{key}/mean']:>8.3f} "
                         f"{metrics[f'gdpo/{key}/zero_var_group_frac']:>16.2f}")
        lines.append(f"distinct advantages per group: GDPO {metrics['gdpo/distinct_adv_per_group']:.2f} / GRPO "
                     f"{metrics['gdpo/grpo_distinct_adv_per_group']:.2f}")
    return lines


def run(args: Any) -> int:
    reward_kwargs = json.loads(args.reward_kwargs) if args.reward_kwargs else {}
    if not isinstance(reward_kwargs, dict):
        raise ValueError(f"--reward-kwargs must be a JSON object, as reward.custom_reward_function.reward_kwargs; got "
                         f"{shown(reward_kwargs)}.")
    rows = read_data(args.data, min(args.rows, MAX_ROWS))
    count = token_counter(args.tokenizer)
    if args.rollouts is not None:
        responses = read_rollouts(args.rollouts, len(rows), count)
        where = f"{len(responses)} rollouts of {args.rollouts}"
    else:
        responses = made_responses(rows, args.template, args.group, count)
        where = (f"{len(responses)} responses made from the data's answers with --template {args.template!r} (per "
                 f"row its gold, {max(args.group - 2, 0)} other golds, an empty one)")
    print(f"check-reward: {args.path}:{args.name} on {len(rows)} rows of {args.data}, {where}; lengths in "
          f"{'tokens' if args.tokenizer else 'words (--tokenizer for tokens)'}")
    function, needs, close = scorer(args.path, args.name, reward_kwargs)
    report = Report()
    try:
        declared = {key.removeprefix(TOKEN_LEVEL_PREFIX) for key in needs.returns}
        undeclared = [key for key in args.keys if needs.returns and key not in declared]
        if undeclared:
            report.problems += [f"--keys names {key!r}, which compute_score does not declare it returns (its "
                                f"compute_score.needs.returns: {list(needs.returns)}){did_you_mean(key, declared)}."
                                for key in undeclared]
        else:
            report = check(rows, responses, function, reward_kwargs, args.keys, args.timeout)
    finally:
        close()
    metrics = summarize(report, responses, args.keys, args.weights, args.rollouts is not None) if report.calls else {}
    for line in table(report, args.keys, metrics) if report.calls else []:
        print(f"  {line}")
    for note in report.notes:
        print(f"  note: {note}")
    if report.problems:
        print("check-reward: FAILED, the run would stop or learn nothing from this:\n  " + "\n  ".join(report.problems))
        return 1
    noted = f"; {len(report.notes)} note(s) above" if report.notes else ""
    print(f"check-reward: OK (every call returned {', '.join(args.keys)} as finite numbers or None{noted})")
    return 0


def add_parser(commands: Any, names: Any, weights_json: Any) -> None:
    """The ``check-reward`` subcommand's arguments."""
    command = commands.add_parser(
        "check-reward",
        help="call your reward function on a sample of your data, on the CPU, before a GPU job",
        description=__doc__.split("\n\n")[0] + " " + __doc__.split("\n\n")[2],
    )
    command.add_argument("--path", required=True, help="reward.custom_reward_function.path: a file or pkg://module")
    command.add_argument("--name", default="compute_score", help="reward.custom_reward_function.name")
    command.add_argument("--keys", required=True, type=names, help="algorithm.gdpo_reward_keys, comma-separated")
    command.add_argument("--weights", type=weights_json, metavar="JSON",
                         help="algorithm.gdpo_reward_weights as a JSON object (default: 1 each)")
    command.add_argument("--reward-kwargs", metavar="JSON", help="reward.custom_reward_function.reward_kwargs")
    command.add_argument("--data", required=True, type=Path, help="the training data: parquet or JSON Lines")
    command.add_argument("--rows", type=int, default=64, help="the data rows checked (default 64, the first ones)")
    command.add_argument("--rollouts", type=Path, metavar="FILE.jsonl",
                         help="your model's responses: one JSON line each with \"row\" and \"response\"")
    command.add_argument("--template", default=TEMPLATE,
                         help="without --rollouts: how a response writes an answer ({answer} is replaced), e.g. "
                              "'</think> \\boxed{{answer}}'")
    command.add_argument("--group", type=int, default=4, help="without --rollouts: responses per row (default 4)")
    command.add_argument("--tokenizer", metavar="DIR", help="the model's tokenizer (a local directory), for lengths")
    command.add_argument("--timeout", type=float, default=600.0,
                         help="seconds one call may take (algorithm.gdpo.reward_timeout_s, default 600)")
