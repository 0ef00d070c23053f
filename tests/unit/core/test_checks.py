"""The checks of single values: one wording, and a bool or a string is never taken for a number."""

import math

import numpy as np
import pytest
import torch

from gdpo_verl.core.checks import boolean, finite_number, is_number, is_reward_value, whole_number


@pytest.mark.parametrize("value", [True, "1", None, math.nan, math.inf])
def test_finite_number_refuses_what_is_not_one(value):
    with pytest.raises(ValueError, match=r"^eps must be a finite number; got "):
        finite_number(value, "eps")


def test_finite_number_bounds():
    assert finite_number(np.float32(0.5), "w") == 0.5
    with pytest.raises(ValueError, match="must be at least 0; got -1"):
        finite_number(-1, "eps", minimum=0)
    with pytest.raises(ValueError, match="must be above 0; got 0"):
        finite_number(0, "timeout", above=0)


def test_whole_number_and_boolean():
    assert whole_number(np.int64(3), "n", minimum=1) == 3
    for value in (0, 2.0, True):
        with pytest.raises(ValueError, match="must be a whole number of at least 1"):
            whole_number(value, "n", minimum=1)
    assert boolean(False, "flag") is False
    with pytest.raises(ValueError, match="flag must be true or false; got 'false'"):
        boolean("false", "flag")


def test_reward_values_may_be_bools_and_numpy_scalars_but_not_strings_or_nan():
    assert all(is_reward_value(value) for value in (True, np.bool_(False), np.float64(0.5), 3))
    assert not any(is_reward_value(value) for value in ("1", None, math.nan, [1.0]))
    assert is_number(math.nan) and not is_number("0.5")


def test_an_integer_too_large_for_a_float_is_no_reward_value_and_raises_nothing():
    # JSON allows integers of 4,300 digits; math.isfinite(10**400) raises OverflowError
    assert not is_reward_value(10**400) and not is_reward_value(-(10**309))
    assert is_reward_value(10**308)
    with pytest.raises(ValueError, match="eps must be a finite number; got an integer too large for a float"):
        finite_number(10**5000, "eps")


@pytest.mark.parametrize("value", [True, np.bool_(False), 1, 0, torch.tensor(True), torch.tensor([0]), np.array(1)])
def test_a_flag_is_a_bool_numpy_s_or_torch_s_or_1_or_0(value):
    assert boolean(value, "flag") is bool(value)


@pytest.mark.parametrize("value", ["false", 1.0, 2, torch.tensor(1.0), torch.tensor([True, False]), None])
def test_a_flag_refuses_anything_else(value):
    with pytest.raises(ValueError, match="flag must be true or false"):
        boolean(value, "flag")
