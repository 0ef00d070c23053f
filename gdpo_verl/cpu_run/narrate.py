"""What a person sees of a CPU training run: the supervisor's terminal, read off the run's own output.

By default the run's whole output goes to its log alone, and the terminal gets:

- a line when the run reaches each phase of its start-up (``PHASES``: verl's and gdpo-verl's own lines mark them),
  with the seconds since the start;
- a line whenever the terminal was silent for ``HEARTBEAT_S`` seconds: what the run is still doing, and how many
  cores its processes keep busy (the supervisor measures it), so a slow start-up is told from a dead one;
- one line per finished step (``step_line``: the rewards' means, the distinct advantages per group under GDPO and
  GRPO, the range of the advantages trained on, the rollout/actor probability difference, the step's time);
- when the run fails, its cause first (``Cause``): the first exception any process of the run printed with a
  traceback (a reward worker's, where verl's trainer only says a group failed), or hydra's refusal of an override,
  read as the key and its fix.

verl's experimental trainers print other start-up lines; a phase no line marks is not said, and the heartbeat
still is. No verl: the supervisor runs this in the run's interpreter, outside the run.
"""
from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

# The terminal says what the run still does when it was silent this long.
HEARTBEAT_S = 15.0
# (a text the run prints when it reaches a phase, what the terminal says then), in the order a run meets them.
PHASES = (
    ("[validate_config] All configuration checks passed", "config checked by verl and gdpo-verl"),
    ("ray init kwargs", "starting Ray"),
    ("Started a local Ray instance", "Ray started; checking gdpo-verl on its node"),
    ("gdpo-verl: \"gdpo\" is gdpo-verl's estimator on all", "gdpo-verl active on every Ray node; verl starts its "
                                                            "workers (each imports torch and verl)"),
    ("(WorkerDict pid=", "starting the actor (FSDP2)"),
    ("actor and ref model engine initialized", "actor ready"),
    ("reward loop manager initialized", "reward worker ready"),
    ("(vLLMHttpServer pid=", "starting the vLLM rollout server"),
    ("all initialize finished, ready to fit", "every part started: step 1 (rollouts, rewards, GDPO, update)"),
)
# An ANSI colour code (Ray colours its prefixes), and the prefix Ray puts before a line a worker printed:
# "(AgentLoopWorkerTQ pid=9009) ", nested for a process under it: "(vLLMHttpServer pid=1) (EngineCore pid=2) ".
COLOUR = re.compile(r"\x1b\[[0-9;]*m")
PREFIX = re.compile(r"^\((?P<who>[^()\s]+) pid=\d+(?:, ip=[^)]*)?\)\s?")
TRACEBACK = "Traceback (most recent call last):"
# Ray's wrapper of an exception raised in another process: the wrapped one's own line follows its remote traceback.
RAY_WRAPPER = re.compile(r"^ray\.exceptions\.\w+\((?P<inner>[\w.]+)\):")
# The last line of a traceback, the first not indented after its header: "ValueError: ...", "TimeoutError",
# "omegaconf.errors.MissingMandatoryValue: ...", "ray.exceptions.RayTaskError(RuntimeError): ...".
# The class's name is CamelCase: a logger's "INFO:..." or "WARNING:..." line printed meanwhile is none.
EXCEPTION = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*[a-z]\w*(?:\([\w.]+\))?(?::.*)?$")
# Python's lines between the exceptions of a chain: the exception raised last (``raise ... from``, an exception raised
# while another was handled) is printed last, and says most (gdpo-verl's messages wrap what they caught).
CHAINED = ("The above exception was the direct cause of the following exception:",
           "During handling of the above exception, another exception occurred:")
# vLLM's logger puts its level, time and place before every line of a traceback it logs (and ends lines with \r).
VLLM_PREFIX = re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d [\d:]+ \[[^\]]+\] ")
# The most of a cause the last line gives: an error message of verl's or ours is a few hundred characters.
CAUSE_CHARS = 1500
# What hydra prints when it refuses an override (hydra/_internal/config_loader_impl.py, and its grammar's parser).
HYDRA_OVERRIDE = re.compile(r"^Could not override '(?P<key>[^']+)'")
HYDRA_NOT_IN_STRUCT = re.compile(r"^Key '(?P<name>[^']+)' is not in struct")
HYDRA_FULL_KEY = re.compile(r"^\s*full_key: (?P<key>\S+)")
HYDRA_APPEND = re.compile(r"^Could not append to config\. An item is already at '(?P<key>[^']+)'")
HYDRA_GRAMMAR = re.compile(r"^(?:no viable alternative at input|mismatched input|extraneous input|token recognition "
                           r"error at:) '(?P<input>.*)'")


def plain(line: str) -> tuple[str | None, str]:
    """(the process a line came from, by Ray's prefix, or None for the command's own; the line without colours and
    prefixes)."""
    text, who = COLOUR.sub("", line.rstrip("\r\n")).rstrip("\r"), None
    while (match := PREFIX.match(text)) is not None:
        who, text = match.group("who"), text[match.end():]
    return who, VLLM_PREFIX.sub("", text)


def step_line(step: int, steps: int, data: dict, label: str = "") -> str:
    """One finished step, from what verl logged for it (its file logger's line): the values it lacks are left out."""
    parts = [f"{key.split('/')[1]} {value:.3f}" for key, value in data.items()
             if key.startswith("gdpo/") and key.endswith("/mean") and key.count("/") == 2]
    if "gdpo/distinct_adv_per_group" in data and "gdpo/grpo_distinct_adv_per_group" in data:
        parts.append(f"distinct advantages per group GDPO {data['gdpo/distinct_adv_per_group']:.2f} / "
                     f"GRPO {data['gdpo/grpo_distinct_adv_per_group']:.2f}")
    if "critic/advantages/min" in data and "critic/advantages/max" in data:
        parts.append(f"advantages [{data['critic/advantages/min']:+.3f}, {data['critic/advantages/max']:+.3f}]")
    if "training/rollout_probs_diff_max" in data:
        parts.append(f"rollout/actor probs diff {data['training/rollout_probs_diff_max']:.4f}")
    if "checkpoint_engine/cpu_tcp/tensors" in data:
        parts.append(f"weights sent over TCP: {data['checkpoint_engine/cpu_tcp/tensors']:g} tensors")
    if "timing_s/step" in data:
        parts.append(f"{data['timing_s/step']:.1f} s")
    return f"{label}step {step} of {steps}: " + "  ".join(parts)


def shortened(text: str, limit: int = CAUSE_CHARS) -> str:
    """``text`` whole, or cut at a word boundary before ``limit`` with " ..." (never mid-word)."""
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " ..."


# hydra ends every error it reports with this line (after its message, or after a traceback of the job's)
HYDRA_END = "Set the environment variable HYDRA_FULL_ERROR=1"


@dataclass
class Cause:
    """The first thing that went wrong in a run, read off its output line by line (``read``)."""

    command: Sequence[str] = ()
    # closest_key(command, full_key): the config key a misspelled override most likely meant (None: none close)
    closest_key: Callable[[Sequence[str], str], str | None] | None = None
    first_error: tuple[str | None, str] | None = None  # (the process, its exception line)
    hydra: list[str] = field(default_factory=list)  # hydra's refusal of the command, as it printed it
    _in_traceback: set = field(default_factory=set)  # the processes whose traceback is being printed
    _wrapped: dict = field(default_factory=dict)  # process -> the exception a Ray wrapper in its traceback wraps
    _chain: dict = field(default_factory=dict)  # process of the first error -> whether a chain's next link follows
    _driver: deque = field(default_factory=lambda: deque(maxlen=12))  # the command's own last lines

    def read(self, line: str) -> None:
        who, text = plain(line)
        if text.startswith(TRACEBACK):
            self._in_traceback.add(who)
            if self._chain.get(who) is False:  # a new traceback, not the next link of the first error's chain
                self._chain.pop(who)
        elif text in CHAINED and who in self._chain:
            self._chain[who] = True
        elif who in self._in_traceback and text[:1] not in ("", " ", "\t") and EXCEPTION.match(text):
            self._exception(who, text)
        elif who is None and text.startswith(HYDRA_END):
            if not self.hydra and self.first_error is None:  # hydra's own refusal, not a job's traceback
                self.hydra = [kept for kept in self._driver if kept.strip()]
        if who is None:
            self._driver.append(text)

    def _exception(self, who: str | None, text: str) -> None:
        """The line ending a traceback of ``who``: the run's first error, or the next link of its chain."""
        wrapper = RAY_WRAPPER.match(text)
        if wrapper is not None:  # the wrapped exception's line ends the traceback
            self._wrapped[who] = wrapper.group("inner")
            return
        wrapped = self._wrapped.pop(who, None)
        if wrapped is not None and not text.startswith(wrapped):
            self._wrapped[who] = wrapped
            return
        self._in_traceback.discard(who)
        if self.first_error is None or self._chain.get(who) is True:
            self.first_error = (who, text)
            self._chain = {who: False}

    def __str__(self) -> str:
        """The cause, for a person (empty when the run printed none)."""
        if self.hydra:
            return shortened(self.hydra_cause())
        if self.first_error is None:
            return ""
        who, text = self.first_error
        return shortened(text) + (f" (raised in {who}, the run's first error)" if who else "")

    def hydra_cause(self) -> str:
        full_key = next((match.group("key") for text in reversed(self.hydra)
                         if (match := HYDRA_FULL_KEY.match(text)) is not None), None)
        if full_key is not None and any(HYDRA_NOT_IN_STRUCT.match(text) for text in self.hydra):
            guess = self.closest_key(self.command, full_key) if self.closest_key is not None else None
            fix = (f"did you mean {guess}? (hydra's advice, +{full_key}, would add a key nothing reads)" if guess else
                   f"check its spelling; a key the config lacks by design takes a + (+{full_key}=...)")
            return f"the override {self.override_of(full_key) or full_key} names no key of the config: {fix}"
        for text in self.hydra:
            if (match := HYDRA_APPEND.match(text)) is not None:
                key = match.group("key")
                return (f"the override {self.override_of(key) or '+' + key} adds {key}, which the config already has: "
                        f"drop the + ({key}=...)")
            if (match := HYDRA_GRAMMAR.match(text)) is not None:
                given = next((argument for argument in self.command
                              if "=" in argument and match.group("input").strip() in argument), None)
                return (f"hydra could not parse the override {given or match.group('input')!r} ({text}); a list is "
                        "written key=[a,b], quoted for the shell: 'key=[a,b]'")
        key = next((match.group("key") for text in self.hydra if (match := HYDRA_OVERRIDE.match(text))), None)
        said = "; ".join(text.strip() for text in self.hydra if not text.startswith("To append"))
        return f"hydra refused the override {self.override_of(key) or key}: {said}" if key else f"hydra: {said}"

    def override_of(self, key: str) -> str | None:
        """The command's override of ``key`` (``key=...``, ``+key=...`` or ``++key=...``), as given."""
        return next((argument for argument in self.command if argument.lstrip("+").split("=", 1)[0] == key), None)


class Narrator:
    """What the terminal shows of a run in the default (not verbose) mode: ``line`` for each line the run prints,
    ``beat`` every look of the supervisor, ``say`` for its own lines (each resets the heartbeat)."""

    def __init__(self, label: str, started: float, write: Callable[[str], None], heartbeat: float = HEARTBEAT_S) -> None:
        self.label, self.started, self.write, self.heartbeat = label, started, write, heartbeat
        self.phase = "starting verl's entry point (importing verl, torch and vLLM)"
        self.reached: set[str] = set()
        self.said_at = started
        self.say_at(started, self.phase)

    def say_at(self, now: float, text: str) -> None:
        self.write(f"{self.label}{now - self.started:>5.0f} s  {text}")
        self.said_at = now

    def line(self, now: float, text: str) -> None:
        _, plain_text = plain(text)
        for marker, said in PHASES:
            if marker not in self.reached and marker in text:
                self.reached.add(marker)
                self.phase = said
                self.say_at(now, plain_text.strip() if marker.startswith("gdpo-verl:") else said)

    def step(self, now: float, line: str) -> None:
        self.write(line)
        self.said_at = now
        self.phase = "training"

    def beat(self, now: float, cores: float) -> None:
        if now - self.said_at >= self.heartbeat:
            self.say_at(now, f"... still: {self.phase} ({cores:.1f} cores busy)")
