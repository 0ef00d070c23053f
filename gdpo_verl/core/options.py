"""The options of a GDPO computation, each declared once: its name, default, check (what it takes) and meaning.

Everything that knows an option reads it from ``OPTIONS``:

- ``GdpoOptions``, the one object the estimators (``gdpo_outcome_parts``, ``corrgrpo_outcome_parts``) take, has a
  field for each option that ``computes``, with its default, checked on creation;
- the per-step records (``gdpo_verl/records/steps.py``) write and read back the options ``recorded``;
- the config check (``verl_adapter/settings.py``) reads ``algorithm.gdpo.<name>``, or the option's ``config_key``
  (``reward_keys`` and ``reward_weights`` are ``algorithm.gdpo_reward_keys`` and ``algorithm.gdpo_reward_weights``,
  ``norm_by_std`` is verl's own ``algorithm.norm_adv_by_std_in_grpo``), refuses the ``gdpo_only`` ones under
  CorrGRPO and an option set away from its default where ``only_with`` says it would not be read;
- the packaged config (``gdpo_verl/config/gdpo/settings.yaml``) writes each option, its doc as a comment above its
  default: ``verl_adapter/config_file.py`` renders it, ``scripts/render_settings.py`` writes it (a test checks the
  shipped file against the rendering);
- ``gdpo-verl demo`` and ``inspect`` take the ``command_line`` ones as ``--<name>``.

Adding an option: declare it here, read it in the computation (``options.<name>``), give it a refused value in the
options' unit test (``test_options.py``), and run ``python scripts/render_settings.py``. ``GdpoOptions``, the config
check, the records, the yaml and the command line need no change.

A check takes the value and what to call it in an error (``"algorithm.gdpo.eps"``, ``"<file>:<line>: eps"``), and
returns the value as the computation takes it, or raises ValueError naming what it takes. No verl, Ray, hydra or
omegaconf: the core, the records and the command line read it without them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, make_dataclass
from typing import Any

from gdpo_verl.core.checks import boolean, did_you_mean, finite_number, one_of, shown
from gdpo_verl.core.conditions import Condition
from gdpo_verl.core.reward_keys import reward_keys, reward_weights


@dataclass(frozen=True)
class Option:
    """One option. ``summary``: one line (the command line's help); ``doc``: what the packaged config says of it,
    its meaning and values (a comment above its key)."""

    name: str
    default: Any
    check: Callable[[Any, str], Any]
    summary: str
    doc: str = ""
    computes: bool = True  # a field of GdpoOptions, read by the estimators
    recorded: bool = True  # written to each step's record, and read back from it
    config_key: str = ""  # a key of verl's own config (algorithm.<key>); "" is algorithm.gdpo.<name>
    gdpo_only: bool = False  # a step of GDPO's own, which CorrGRPO has no place for
    only_with: tuple[str, Any] | None = None  # read only where another option has this value
    command_line: bool = False  # gdpo-verl demo and inspect take it as --<name>

    def __post_init__(self) -> None:
        if self.config_key and not self.config_key.startswith("algorithm."):
            raise ValueError(f"option {self.name}: config_key must be a key under algorithm; got {self.config_key!r}")
        if self.command_line and self.choices is None and not isinstance(self.default, float):
            raise ValueError(f"option {self.name}: the command line takes a choice or a number, not "
                             f"{type(self.default).__name__}")

    @property
    def in_block(self) -> bool:
        """Under ``algorithm.gdpo`` (the packaged config's block), as against a key of verl's own."""
        return not self.config_key

    @property
    def key(self) -> str:
        return self.config_key or f"algorithm.gdpo.{self.name}"

    @property
    def choices(self) -> tuple[str, ...] | None:
        """The values a choice takes (None for other options)."""
        return getattr(self.check, "choices", None)


def fraction(why_at_most_1: str) -> Callable[[Any, str], float]:
    def check(value: Any, what: str) -> float:
        number = finite_number(value, what, minimum=0)
        if number > 1:
            raise ValueError(f"{what} must be at most 1; got {shown(value)}. {why_at_most_1}")
        return number
    return check


def seconds_or_none(value: Any, what: str) -> float | None:
    return None if value is None else finite_number(value, f"{what} (seconds, or null)", above=0)


def directory_or_none(value: Any, what: str) -> str | None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ValueError(f"{what} must be a directory path or null; got {shown(value)}.")
    return value


CONDITION_KEYS = ("reward", "given", "at_least")


def conditions(value: Any, what: str) -> tuple[Condition, ...]:
    """A list of ``Condition``s, or of mappings with exactly ``CONDITION_KEYS`` (as a config gives them); null is
    none. Whether the rewards they name exist is checked where the rewards are known (``check_conditions``)."""
    example = f"for example {what}='[{{reward:length,given:correct,at_least:1}}]'"
    if value is None:
        return ()
    if isinstance(value, (str, Mapping)) or not isinstance(value, Sequence):
        raise ValueError(f"{what} must be a list of conditions; got {shown(value)}; {example}.")
    made = []
    for item in value:
        if isinstance(item, Condition):
            made.append(item)
        elif isinstance(item, Mapping) and set(item) == set(CONDITION_KEYS):
            made.append(Condition(str(item["reward"]), str(item["given"]), item["at_least"]))
        else:
            raise ValueError(f"each {what} entry needs exactly the keys {list(CONDITION_KEYS)}; got {shown(item)}; "
                             f"{example}.")
    return tuple(made)


OPTIONS: dict[str, Option] = {option.name: option for option in (
    Option(
        "reward_keys", None, reward_keys,
        "the reward components to normalize separately, by name",
        """\
Required (null stops the first step with a message). The reward components to normalize
separately, by name: keys of the dict that your compute_score returns (verl stores each per
response), or a tensor batch["token_level_scores_<key>"] of shape (batch, response_length) when a
reward manager provides per-token scores for <key> (or reward_extra_info["token_level_scores_<key>"],
one value per response token). Works on every verl trainer (docs/training-loop.md).
A list, even for one key. A key missing from the batch stops the step with the list of keys present.
Names that are no reward component are refused before Ray starts: verl's per-sample fields (index,
uid, data_source, priority, ...), score (verl's summed reward), acc (verl's copy of it when compute_score
returns a plain number) and gdpo_signature (docs/estimator.md#where-rewards-come-from).
A misspelled algorithm.gdpo* key is an error. Under another adv_estimator (grpo, ...), setting the keys
logs the gdpo/ metrics of what GDPO would compute on each batch, without touching that estimator's
advantages (docs/training-loop.md#metrics).""",
        computes=False, recorded=False, config_key="algorithm.gdpo_reward_keys",
    ),
    Option(
        "reward_weights", None, reward_weights,
        "the weight of each component's normalized advantage in the sum (null: 1.0 each)",
        """\
Weight of each component's normalized advantage in the sum (the paper's w_k). null = 1.0 each.
A list aligned with gdpo_reward_keys, e.g. [1.0, 0.5], or a mapping {correct: 1.0, length: 0.5}.
A weight may be a schedule: a list of [step, weight] points, linear between them and constant outside,
read at verl's global step (a resumed run reads the step it resumes at), e.g. phase a length reward in
after correctness is learned: '{correct: 1.0, length: [[0, 0.0], [50, 0.0], [100, 1.0]]}'.
gdpo/<component>/weight logs the weights in force each step.
Weights act after normalization, so they trade components off without regard to their raw scales.
A negative weight trains the policy to lower that component (for a reward where more is worse): it is
allowed, and logged once as a WARNING at start-up. All weights 0 is refused.""",
        computes=False, recorded=False, config_key="algorithm.gdpo_reward_weights",
    ),
    Option(
        "norm_by_std", True, boolean,
        "divide by the group std in step 1 (the paper); false only subtracts the group mean",
        """\
verl's own switch, honoured per component: true divides by the group std (the paper),
false only subtracts the group mean ("GRPO w/o std" in the paper's ablation; Dr.GRPO style).""",
        config_key="algorithm.norm_adv_by_std_in_grpo",
    ),
    Option(
        "batch_norm", "token", one_of("token", "sequence", "none"),
        "step 3, over the whole batch: token (verl's masked whitening), sequence (the paper's Eq. 6) or none",
        """\
Batch-level normalization of the summed advantage (step 3, the paper's Eq. 6), over the whole
batch, never per micro-batch:
  token    - verl's masked_whiten over valid response tokens (what the authors' verl code does);
             long responses weigh more in the mean, so a zero-variance group gets a small
             non-zero advantage.
  sequence - the paper's formula: every response counts once; zero-variance groups stay at the
             same value for all their responses.
  none     - no batch step (the paper reports this variant occasionally fails to converge).""",
        gdpo_only=True,
    ),
    Option(
        "eps", 1e-6,
        fraction("It is added to every std, so a large eps shrinks every advantage towards 0 (training on "
                 "nothing). Typical values: 1e-6 (the default), 1e-4 (TRL)."),
        "added to every std (from 0 to 1)",
        """\
Added to every std (group std in step 1, batch std in "sequence" mode), from 0 to 1. A tiny eps
stretches a continuous reward with a tiny in-group spread to unit scale; raise it (e.g. 1e-4) for
such rewards.""",
    ),
    Option(
        "conditions", (), conditions,
        "keep a reward only for responses where another reaches a threshold, before step 1",
        """\
Conditioned rewards, the paper's general form (section 3.2): keep reward k only for responses whose
reward l is at least t, else 0; e.g. pay for brevity only when the answer is correct:
  algorithm.gdpo.conditions='[{reward:length,given:correct,at_least:1}]'
Both names must be in gdpo_reward_keys; `given` is read before any condition applies. Works with any
reward function. gdpo/<reward>/mean logs the conditioned value, gdpo/<reward>/raw_mean the raw one.""",
        recorded=False,
    ),
    Option(
        "baseline", "mean", one_of("mean", "leave_one_out"),
        "what each response is compared with in step 1: the group mean, or the mean of its other responses",
        """\
The baseline each response is compared with in step 1, per component and group:
  mean          - the group's mean and std (the paper).
  leave_one_out - the mean of the group's other responses, divided by the std of those others (NeMo-RL's
                  use_leave_one_out_baseline: a response does not pull its own baseline towards itself;
                  where the others are all equal, the group's std divides instead).""",
        gdpo_only=True, command_line=True,
    ),
    Option(
        "conflict", "none", one_of("none", "hard", "snr"),
        "GD2PO: mask the responses whose rewards pull their advantage in opposite directions",
        """\
GD2PO (arXiv 2606.16771): a response whose components pull its advantage in opposite directions is
masked (advantage 0), each group's summed advantage is scaled by the fraction of it kept, and step 3
normalizes over the kept responses only.
  none - off (the paper's GDPO).
  hard - mask every response where one weighted normalized component is positive and another negative.
  snr  - mask such a response only when its agreement |sum_k c_k| / sum_k |c_k| is below
         conflict_threshold (GD2PO's recommendation for three or more components).
gdpo/conflict_masked_frac logs the fraction masked each step.""",
        gdpo_only=True, command_line=True,
    ),
    Option(
        "conflict_threshold", 0.8, fraction("The agreement |s| it is compared with never exceeds 1."),
        "conflict=snr masks a response whose agreement |s| is below it (from 0 to 1)",
        """\
conflict: snr masks a response whose agreement is below this, from 0 to 1 (read with snr only: set
away from its default under another conflict, it is refused).""",
        gdpo_only=True, only_with=("conflict", "snr"), command_line=True,
    ),
    Option(
        "adaptive_weights", "none", one_of("none", "saw"),
        "SAW: multiply each reward's weight by its coefficient of variation over the batch",
        """\
SAW (arXiv 2606.07705): each step, weigh component k by K * CV_k / sum_j CV_j, its coefficient of
variation (std / |mean|) over the batch, times its configured weight. A component whose mean is near 0
has a large CV and takes most of the weight: shift such a reward away from 0 in compute_score (SAW's code
adds 3 to its correctness reward). gdpo/<component>/weight logs the weights in force.
  none - the configured weights alone.  saw - SAW's weights times them.""",
        gdpo_only=True, command_line=True,
    ),
    Option(
        "dump_dir", None, directory_or_none,
        "a directory where every advantage step appends its record, for gdpo-verl inspect",
        """\
A directory: every advantage step appends one JSON line to <dump_dir>/gdpo_steps.jsonl with each
response's group (uid), reward components, response length and final advantage, for
`gdpo-verl inspect <dump_dir>`. Both trainers; verl's own V1 rollout dump drops the components.
About 70 bytes per response with two rewards. null: nothing is written. A resumed run records each
step once: records of steps it runs again are moved to gdpo_steps.superseded.jsonl beside the file.""",
        computes=False, recorded=False,
    ),
    Option(
        "reward_timeout_s", 600, seconds_or_none,
        "the gdpo_verl reward manager's limit on one compute_score call, in seconds (null: none)",
        """\
The gdpo_verl reward manager's limit on one compute_score call, in seconds: a call that has not
returned by then fails the step with an error naming the limit, where verl would wait forever.
null: no limit. gdpo-verl's own rewards bound their work far below this.""",
        computes=False, recorded=False,
    ),
)}

DEFAULTS: dict[str, Any] = {name: option.default for name, option in OPTIONS.items()}
COMPUTED = tuple(name for name, option in OPTIONS.items() if option.computes)
RECORDED = tuple(name for name, option in OPTIONS.items() if option.recorded)
IN_BLOCK = tuple(name for name, option in OPTIONS.items() if option.in_block)
GDPO_ONLY = tuple(name for name, option in OPTIONS.items() if option.gdpo_only)
COMMAND_LINE = tuple(name for name, option in OPTIONS.items() if option.command_line)


def _check_fields(self: Any) -> None:
    for name in COMPUTED:
        object.__setattr__(self, name, checked(name, getattr(self, name)))


GdpoOptions = make_dataclass(
    "GdpoOptions", [(name, Any, field(default=OPTIONS[name].default)) for name in COMPUTED], frozen=True, kw_only=True,
    namespace={"__post_init__": _check_fields, "__module__": __name__, "__doc__": """\
How a GDPO computation normalizes: a field for each option that ``computes`` (``COMPUTED``), with the default,
check and meaning declared in ``OPTIONS``; each value checked on creation (ValueError naming the option)."""},
)


def gdpo_options(given: Mapping[str, Any]) -> GdpoOptions:
    """``GdpoOptions`` from keyword options (``gdpo_advantage(..., eps=1e-4)``); a name that is no such option is
    refused, naming the closest one."""
    unknown = sorted(set(given) - set(COMPUTED))
    if unknown:
        named = ", ".join(f"{name!r}{did_you_mean(name, COMPUTED)}" for name in unknown)
        raise ValueError(f"unknown option(s) {named}; the computation takes {list(COMPUTED)}.")
    return GdpoOptions(**given)


def as_options(value: Any) -> GdpoOptions:
    """``value`` when it is a ``GdpoOptions`` (what the estimators take); anything else, a mapping of options
    included, is refused naming how to give them."""
    if not isinstance(value, GdpoOptions):
        raise TypeError(f"options must be a GdpoOptions, such as GdpoOptions(batch_norm='sequence'); got "
                        f"{type(value).__name__}. gdpo_advantage and gdpo_parts also take the options as keywords.")
    return value


def checked(name: str, value: Any, what: str | None = None) -> Any:
    """``value`` of option ``name`` as the computation takes it (ValueError naming ``what``, the option's name by
    default, when it is not one)."""
    return OPTIONS[name].check(value, what or name)


def unread(given: Iterable[str], values: Mapping[str, Any]) -> list[str]:
    """The options among ``given`` that a computation with ``values`` (every option's value in force) would not
    read (``only_with``)."""
    return [name for name in given if name in OPTIONS and OPTIONS[name].only_with is not None
            and values[OPTIONS[name].only_with[0]] != OPTIONS[name].only_with[1]]
