"""The options' one declaration (gdpo_verl/core/options.py): the README, the core, the records and the checks all
read it (the packaged config: tests/integration/verl_adapter/test_config_file.py)."""

import pytest
import torch

from gdpo_verl.core import corrgrpo_outcome_parts, gdpo_outcome_parts, options
from gdpo_verl.core.options import (
    COMPUTED, DEFAULTS, OPTIONS, RECORDED, GdpoOptions, checked, gdpo_options, unread,
)
from gdpo_verl.records.steps import RecordWriter, load_steps
from tests.readme import README



def test_the_readmes_options_table_lists_every_option_with_its_declared_default():
    # a row "| `key` | `default` | meaning |" per option, under its config key (the block's as gdpo.<name>)
    rows = {}
    for line in README.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) >= 3:
            rows[cells[0].strip("`")] = cells[1].split()[0].strip("`")
    spelled = {"null": None, "required": None, "[]": (), "true": True, "false": False}
    for name, option in OPTIONS.items():
        key = f"gdpo.{name}" if option.in_block else option.config_key.removeprefix("algorithm.")
        assert key in rows, f"the README's options table has no row for {key}"
        text = rows[key]
        value = spelled[text] if text in spelled else type(option.default)(text)
        assert value == option.default, (key, text, option.default)


def test_gdpo_options_takes_each_computed_option_refusing_what_its_declaration_refuses():
    assert {name: getattr(GdpoOptions(), name) for name in COMPUTED} == {name: DEFAULTS[name] for name in COMPUTED}
    for name in COMPUTED:
        value, message = REFUSED[name]
        with pytest.raises(ValueError) as refused:
            GdpoOptions(**{name: value})
        assert str(refused.value).startswith(f"{name} ") and message in str(refused.value)
    with pytest.raises(ValueError, match=r"unknown option\(s\) 'batchnorm' \(did you mean 'batch_norm'\?\)"):
        gdpo_options({"batchnorm": "none"})
    with pytest.raises(ValueError, match=r"'dump_dir'; the computation takes"):  # declared, but no computation's
        gdpo_options({"dump_dir": "/tmp"})
    assert set(RECORDED) <= set(COMPUTED)
    # the object, not a mapping of options in its place (the fifth argument, after the weights)
    for outcome in (gdpo_outcome_parts, corrgrpo_outcome_parts):
        with pytest.raises(TypeError, match="options must be a GdpoOptions, such as GdpoOptions"):
            outcome({"a": [1.0, 0.0]}, [1, 1], ["p", "p"], None, {"eps": 1e-3})


# one value each option refuses, and what the refusal says: a new option needs a row here
REFUSED = {
    "reward_keys": (["correct", "score"], "lists 'score', which is no reward component"),
    "reward_weights": ("1.0", "must be a list aligned with gdpo_reward_keys or a mapping"),
    "norm_by_std": ("false", "must be true or false; got 'false'"),
    "batch_norm": ("batch", "must be one of ('token', 'sequence', 'none'); got 'batch'"),
    "eps": (2.0, "must be at most 1; got 2.0. It is added to every std"),
    "conditions": ("length>=1", "must be a list of conditions; got 'length>=1'"),
    "baseline": ("median", "must be one of ('mean', 'leave_one_out'); got 'median'"),
    "conflict": ("soft", "must be one of ('none', 'hard', 'snr'); got 'soft'"),
    "conflict_threshold": (1.5, "must be at most 1; got 1.5"),
    "adaptive_weights": ("cv", "must be one of ('none', 'saw'); got 'cv'"),
    "dump_dir": ("  ", "must be a directory path or null; got '  '"),
    "reward_timeout_s": (0, "(seconds, or null) must be above 0; got 0"),
}


def test_every_option_has_a_refused_value_here():
    assert set(REFUSED) == set(OPTIONS)


@pytest.mark.parametrize("name", list(REFUSED))
def test_each_option_takes_its_default_and_refuses_a_bad_value_naming_where_it_came_from(name):
    if name != "reward_keys":  # required: its default, null, stops the run (test_settings.py)
        assert checked(name, DEFAULTS[name]) == DEFAULTS[name]
    value, message = REFUSED[name]
    with pytest.raises(ValueError) as refused:
        checked(name, value, f"{OPTIONS[name].key}")
    assert str(refused.value).startswith(f"{OPTIONS[name].key}") and message in str(refused.value)


def test_values_that_mean_the_same_are_taken_as_the_computation_takes_them():
    assert checked("norm_by_std", 0) is False and checked("eps", 1) == 1.0
    assert checked("conditions", [{"reward": "length", "given": "correct", "at_least": 1}]) == (
        options.Condition("length", "correct", 1),)
    with pytest.raises(ValueError, match="needs exactly the keys"):
        checked("conditions", [{"reward": "length", "given": "correct"}])
    with pytest.raises(ValueError, match=r"finite number; got an integer too large for a float \(about 4,001"):
        checked("eps", 10**4000)


def test_an_option_is_unread_only_where_the_option_it_needs_is_set_otherwise():
    assert unread(["conflict_threshold"], {**DEFAULTS, "conflict_threshold": 0.5}) == ["conflict_threshold"]
    assert unread(["conflict_threshold"], {**DEFAULTS, "conflict": "snr", "conflict_threshold": 0.5}) == []
    assert unread(["eps"], DEFAULTS) == []


def test_a_record_carries_every_recorded_option_and_reads_it_back(tmp_path):
    chosen = {"norm_by_std": False, "batch_norm": "sequence", "eps": 1e-3, "baseline": "leave_one_out",
              "conflict": "snr", "conflict_threshold": 0.3, "adaptive_weights": "saw"}
    assert set(chosen) == set(RECORDED) and all(chosen[name] != DEFAULTS[name] for name in chosen)
    scores = {"correct": torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0, 1.0]),
              "length": torch.tensor([0.0, 1.0, 0.5, 1.0, 0.0, 1.0])}
    parts = gdpo_outcome_parts(scores, torch.ones(6), list("aaabbb"), options=GdpoOptions(**chosen))
    RecordWriter().append(tmp_path, parts, list("aaabbb"), 3)
    (record,) = load_steps(tmp_path)
    assert record.recorded == chosen


def test_a_declaration_the_config_cannot_hold_is_refused():
    with pytest.raises(ValueError, match="config_key must be a key under algorithm"):
        options.Option("x", 1.0, options.fraction(""), "x", config_key="trainer.x")
    with pytest.raises(ValueError, match="the command line takes a choice or a number"):
        options.Option("x", None, options.directory_or_none, "x", command_line=True)
