"""A real two-node Ray cluster on this machine (Ray's own ``ray.cluster_utils.Cluster``: a head node and a worker
node, each a raylet of its own), with token authentication, run by test_multi_node.py in a process of its own.

1. The head (the driver's node) has no CPU, so every task and actor with a CPU, verl's TaskRunner's stand-in
   here included, runs on the worker node. "gdpo" must resolve to gdpo-verl on every node.
2. On the worker node, an actor writes samples to TransferQueue (started from there too) and runs verl's real
   V1 advantage stage (``PPOTrainer._compute_advantage``, wrapped by gdpo-verl) on them; the driver computes
   the same batch in its own process through verl's legacy ``compute_advantage``. Both must agree.
3. A third node joins whose Python cannot import gdpo-verl (its processes start with a ``sitecustomize`` that
   makes ``import gdpo_verl`` fail as where the package is not installed; a path alone cannot hide it, as Ray
   hands every worker the driver's ``sys.path``): verl there falls back to its built-in "gdpo" without a word,
   and ``require_plugin_on_every_node`` must refuse the cluster, naming that node; verl's own ``main_ppo``
   pointed at the cluster must stop the same way after it connects, before its TaskRunner starts.
4. That node leaves, and one joins whose worker process dies in the check (it exits while importing verl's
   estimators): the check must still name the node, with what happened there, not fail with Ray's own error.

Prints one JSON line per result for the test to read.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

NOT_INSTALLED = """import importlib.abc
import sys


class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "gdpo_verl":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())
"""

DIES_IN_THE_CHECK = """import importlib.abc
import os
import sys


class Dies(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "verl.trainer.ppo.core_algos":
            os._exit(1)
        return None


sys.meta_path.insert(0, Dies())
"""


def say(**fields):
    """One line of results, in the file named by the first argument: Ray forwards its workers' output to this
    process's stdout, where a worker's line cut short (one that dies in the check) can run into a result line."""
    with open(sys.argv[1], "a") as results:
        results.write(json.dumps(fields) + "\n")


def main() -> None:
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    import numpy as np
    import ray
    import torch
    from ray.cluster_utils import Cluster

    import verl  # noqa: F401  (loads the plugin in the driver)
    from verl import DataProto
    from verl.trainer.ppo.ray_trainer import compute_advantage

    from gdpo_verl.verl_adapter.cluster import require_plugin_on_every_node
    from tests.integration.verl_adapter.v1_samples import KEYS, random_samples, trainer

    on_path = {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    common = {"object_store_memory": 100 * 1024 * 1024}
    cluster = Cluster(initialize_head=True, head_node_args={**common, "num_cpus": 0, "include_dashboard": False,
                                                            "env_vars": on_path})
    try:
        worker = cluster.add_node(**common, num_cpus=4, resources={"worker_node": 1}, env_vars=on_path)
        ray.init(address=cluster.address, log_to_driver=False)
        driver_node = ray.get_runtime_context().get_node_id()
        say(auth_mode=os.environ["RAY_AUTH_MODE"], nodes=len([n for n in ray.nodes() if n["Alive"]]))

        say(resolved=[[node.node_id, node.resolved] for node in require_plugin_on_every_node()])

        @ray.remote(num_cpus=1)
        class StageOnNode:
            """Where verl's TaskRunner runs the V1 advantage stage: TransferQueue, then the stage."""

            def run(self, samples):
                import transfer_queue as tq
                import verl  # noqa: F401
                from omegaconf import OmegaConf

                from tests.integration.verl_adapter.v1_samples import put_samples, read_advantages, trainer

                # TransferQueue spreads its storage over the nodes; the head has no CPU for it here
                storage = {"num_data_storage_units": 1, "required_node_resource": "worker_node"}
                tq.init(OmegaConf.create({"backend": {"SimpleStorage": storage}}))
                try:
                    batch = put_samples(samples)
                    metrics = {}
                    trainer()._compute_advantage(batch, metrics)
                    advantages, mask = read_advantages(batch)
                finally:
                    tq.close()
                return ray.get_runtime_context().get_node_id(), advantages.tolist(), mask.tolist(), metrics

        samples = random_samples(seed=11)
        stage_node, advantages, mask, metrics = ray.get(StageOnNode.remote().run.remote(samples), timeout=300)
        legacy = DataProto.from_dict(
            tensors={"response_mask": torch.tensor(mask), "token_level_rewards": torch.zeros(len(mask), len(mask[0]))},
            non_tensors={
                "uid": np.array([uid for uid, *_ in samples], dtype=object),
                **{key: np.array([info[key] for *_, info in samples]) for key in KEYS},
            },
        )
        in_process = compute_advantage(legacy, adv_estimator="gdpo", config=trainer().config.algorithm)
        difference = (torch.tensor(advantages) - in_process.batch["advantages"]).abs().max().item()
        say(stage_node=stage_node, driver_node=driver_node, worker_node=worker.node_id, max_difference=difference,
            gdpo_metrics=sorted(key for key in metrics if key.startswith("gdpo/")))

        def node_starting_with(sitecustomize: str):
            """A node whose Python processes run ``sitecustomize`` first."""
            folder = Path(tempfile.mkdtemp(prefix="gdpo_verl_node_"))
            (folder / "sitecustomize.py").write_text(sitecustomize)
            return cluster.add_node(**common, num_cpus=1, env_vars={"PYTHONPATH": str(folder)})

        def refusal() -> str | None:
            try:
                require_plugin_on_every_node()
            except RuntimeError as error:
                return str(error)
            return None

        bare = node_starting_with(NOT_INSTALLED)
        say(bare_node=bare.node_id, refused=refusal())

        # verl's own main_ppo, pointed at this cluster: it stops after connecting, before its TaskRunner starts
        with tempfile.TemporaryDirectory() as outputs:  # hydra writes its outputs/ folder in the cwd
            run = subprocess.run(
                [sys.executable, "-m", "verl.trainer.main_ppo", "--config-path", "pkg://gdpo_verl.config",
                 "--config-name", "gdpo_trainer", "algorithm.gdpo_reward_keys=[correct,length]",
                 *(f"actor_rollout_ref.{role}_micro_batch_size_per_gpu=1"
                   for role in ("actor.ppo", "rollout.log_prob", "ref.log_prob")),
                 f"+ray_kwargs.ray_init.address={cluster.address}"],
                capture_output=True, text=True, timeout=300, cwd=outputs,
            )
        say(main_ppo_code=run.returncode, main_ppo_connected="ray init kwargs" in run.stdout,
            main_ppo_refused=next((line for line in run.stderr.splitlines() if "gdpo-verl is not active" in line), None),
            task_runner_started="(TaskRunnerV1 pid=" in run.stdout + run.stderr, main_ppo_tail=run.stderr[-1500:])

        cluster.remove_node(bare)
        crashing = node_starting_with(DIES_IN_THE_CHECK)
        say(crashing_node=crashing.node_id, crashed_refused=refusal())
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
