"""gdpo-verl on every node of a Ray cluster, checked before training starts.

verl loads plugins from entry points and, when one fails to load, logs it at DEBUG level and goes on
(``verl/__init__.py``). On a node whose Python environment lacks gdpo-verl, "gdpo" therefore resolves to
verl's own built-in estimator, without a word: a run whose TaskRunner lands there trains with the wrong
estimator. ``require_plugin_on_every_node`` runs a small task pinned to each live node and stops the run,
naming each node where "gdpo" is not this plugin's and what to do.

``main_ppo`` runs the check after it connects to Ray and before it starts verl's TaskRunner (see
``trainer_hooks``); ``gdpo-verl doctor --ray-address ...`` runs the same check against a running cluster.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gdpo_verl.verl_adapter.names import ESTIMATOR_NAME, OURS

# A node's check starts a Python worker there and imports verl: seconds on an idle node, minutes on a loaded one.
NODE_CHECK_TIMEOUT_S = 600.0
NO_ANSWER = "no answer within"

FIX = (
    "Install gdpo-verl in the Python environment Ray runs on each such node (the same version as the driver's), "
    "then restart Ray there (ray stop; ray start --address ...); or ship it with the job (runtime_env "
    "py_modules/pip). Nodes added later by an autoscaler need it in their image too."
)


@dataclass(frozen=True)
class NodeResolution:
    node_id: str
    address: str
    resolved: str  # what "gdpo" resolves to there, "error: ..." or "no answer within N s"

    @property
    def ok(self) -> bool:
        return self.resolved == OURS

    @property
    def answered(self) -> bool:
        return not self.resolved.startswith(NO_ANSWER)


def node_check_timeout() -> float:
    """``GDPO_VERL_NODE_CHECK_TIMEOUT_S`` (seconds, default 600), checked."""
    text = os.environ.get("GDPO_VERL_NODE_CHECK_TIMEOUT_S", str(NODE_CHECK_TIMEOUT_S))
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"GDPO_VERL_NODE_CHECK_TIMEOUT_S={text!r} is not a number of seconds above 0; unset it for "
                         f"the default ({NODE_CHECK_TIMEOUT_S:g} s).")
    return value


def plugin_on_nodes(timeout_s: float | None = None) -> list[NodeResolution]:
    """What "gdpo" resolves to on every live node of the connected Ray cluster (``ray.init`` done)."""
    if timeout_s is None:
        timeout_s = node_check_timeout()

    def resolve() -> str:
        # Nested, so cloudpickle sends it by value: it must run where gdpo-verl cannot be imported.
        try:
            from verl.trainer.ppo import core_algos

            fn = core_algos.get_adv_estimator_fn(ESTIMATOR_NAME)
        except Exception as exc:  # this probe's answer, shown to the user by the caller
            return f"error: {type(exc).__name__}: {exc}"
        return f"{fn.__module__}.{fn.__qualname__}"

    return _answers_on_nodes(resolve, timeout_s)


def _answers_on_nodes(probe_fn, timeout_s: float) -> list[NodeResolution]:
    """``probe_fn()`` (a string) run once on every live node, as a Ray task pinned there; a node whose task did
    not answer within ``timeout_s`` gets ``NO_ANSWER``, one whose task died there the error."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    # A worker that dies under the probe is Ray's failure, not the node's answer: Ray runs the probe again on a new
    # worker, up to twice (seen: a worker ended by the force-cancel of an earlier check's late probe was handed the
    # next check's probe). A probe that kills its worker every time is reported with Ray's error.
    probe = ray.remote(num_cpus=0, max_retries=2)(probe_fn)
    nodes = [node for node in ray.nodes() if node.get("Alive")]
    pending = {
        probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)).remote(): node
        for node in nodes
    }
    ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=timeout_s)
    results = []
    for reference, node in pending.items():
        if reference in ready:
            try:
                resolved = ray.get(reference)
            except ray.exceptions.RayError as exc:  # the probe's process died there: that node's answer
                resolved = f"error: {type(exc).__name__}: {str(exc).splitlines()[0].rstrip('.')}"
        else:
            ray.cancel(reference, force=True)
            resolved = f"{NO_ANSWER} {timeout_s:g} s"
        results.append(NodeResolution(node["NodeID"], node.get("NodeManagerAddress", "?"), resolved))
    return results


SANDBOX_OK = "sandbox ok"


def require_reward_on_every_node(node_check: Callable[..., Any], reward_kwargs: dict, timeout_s: float | None = None,
                                 reward: str | None = None) -> list[NodeResolution]:
    """A reward's ``node_check`` (``RewardNeeds``: it starts the reward's sandbox once), with these reward_kwargs,
    run on every node; raise RuntimeError naming the reward (``reward``, else the check's module) and each node
    where it fails, with that node's problem and its fix; else the nodes."""
    options = dict(reward_kwargs)

    def probe() -> str:
        try:
            node_check(**options)
        except Exception as exc:  # this probe's answer, shown to the user by the caller
            return f"error: {type(exc).__name__}: {exc}"
        return SANDBOX_OK

    results = _answers_on_nodes(probe, node_check_timeout() if timeout_s is None else timeout_s)
    bad = [result for result in results if result.resolved != SANDBOX_OK]
    if bad:
        raise RuntimeError(
            f"the sandbox of the reward in {reward or node_check.__module__} cannot run on {len(bad)} of "
            f"{len(results)} Ray nodes, where its reward workers may run: {_listed(bad)}."
        )
    return results


def require_plugin_on_every_node(timeout_s: float | None = None) -> list[NodeResolution]:
    """Raise RuntimeError naming each node where "gdpo" is not gdpo-verl's estimator, and, apart, each node that
    did not answer in time (slow or stuck: not known to lack gdpo-verl); else the nodes."""
    results = plugin_on_nodes(timeout_s)
    bad = [result for result in results if result.answered and not result.ok]
    silent = [result for result in results if not result.answered]
    problems = []
    if bad:
        problems.append(
            f"gdpo-verl is not active on {len(bad)} of {len(results)} Ray nodes, so \"gdpo\" would not be this "
            f"plugin's estimator there: {_listed(bad)}. {FIX}"
        )
    if silent:
        problems.append(
            f"{len(silent)} of {len(results)} Ray nodes did not answer gdpo-verl's check in time, so whether "
            f"\"gdpo\" is this plugin's estimator there is unknown (the node is slow or stuck; this is not a sign "
            f"that gdpo-verl is missing): {_listed(silent)}. The check starts a Python worker on the node and "
            "imports verl, which a heavily loaded node can take minutes for: raise GDPO_VERL_NODE_CHECK_TIMEOUT_S "
            f"(default {NODE_CHECK_TIMEOUT_S:g} s), or look at the node (ray status; its raylet log)."
        )
    if problems:
        raise RuntimeError(" ".join(problems))
    return results


def _listed(results: list[NodeResolution]) -> str:
    return "; ".join(f"node {r.address} (id {r.node_id[:12]}): {_what(r.resolved)}" for r in results)


def _what(resolved: str) -> str:
    if resolved.startswith(("error:", "no answer")):
        return resolved
    return f'"gdpo" resolves to {resolved} (verl\'s built-in, not gdpo-verl)'

