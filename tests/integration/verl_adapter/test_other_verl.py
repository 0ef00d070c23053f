"""gdpo-verl on another verl than 0.9.1 from the index: no version is refused as such, what the plugin uses of verl
(gdpo_verl/verl_adapter/touch_points.py) is checked where it is used; a verl built from source (it reports
0.10.0.dev0) installs beside the plugin without pip replacing it, and GDPO runs on it; a verl without TransferQueue
(verl's ``neo`` branch) trains on the legacy trainer and refuses the V1 trainer before Ray starts.

The other verls are the installed 0.9.1 under another version number (a wheel rebuilt here), or with one touch
point changed or TransferQueue hidden by tests/fixtures/other_verl/sitecustomize.py in a fresh process: verl's
own code, nothing mocked."""
from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import sysconfig
import zipfile
from importlib.metadata import distribution
from pathlib import Path
from types import ModuleType

import pytest

import verl  # noqa: F401  (loads the entry point)
from verl.trainer.ppo import core_algos

from gdpo_verl.verl_adapter import CORRGRPO_NAMES, OURS, compute_gdpo_advantage, plugin
from gdpo_verl.verl_adapter.estimator import compute_corrgrpo_advantage
from gdpo_verl.verl_adapter.settings import check_config
from gdpo_verl.verl_adapter.touch_points import (TOUCH_POINTS, TouchPoint, VerlChanged, check_all, problem,
                                                  verl_version)

ROOT = Path(__file__).resolve().parents[3]
OTHER_VERL = ROOT / "tests" / "fixtures" / "other_verl"
FRESH_TIMEOUT_S = 300
# the installed verl's version as the refusals name it (0.9.1 in .venv; the suite also runs on verl's main branch)
VERSION = verl_version()


# In a process of its own: what "gdpo" resolves to in verl, then gdpo-verl's demo, which runs verl's
# compute_advantage with "grpo" and "gdpo" on the shipped rollouts (its summary, as JSON, is the last line).
DEMO = ("import importlib.metadata as metadata, sys\n"
        "import verl, gdpo_verl\n"
        "from verl.trainer.ppo import core_algos\n"
        "from gdpo_verl.tools.cli import main\n"
        "print('verl', metadata.version('verl'), verl.__version__, verl.__file__)\n"
        "print('gdpo_verl', gdpo_verl.__file__)\n"
        "fn = core_algos.get_adv_estimator_fn('gdpo')\n"
        "print('resolved:', fn.__module__ + '.' + fn.__qualname__)\n"
        "sys.exit(main(['demo', '--json']))\n")
# The shipped rollouts' summary under the plugin's GDPO (docs/collapse.md, "GRPO and GDPO side by side").
DEMO_GDPO = {"gdpo_distinct_advantages": 17, "gdpo_merged_pairs": 1}


def demo_ran_the_plugins_gdpo(result: subprocess.CompletedProcess) -> list[str]:
    """The lines before the demo's report; asserts that verl ran the plugin's "gdpo" on the shipped rollouts."""
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert f"resolved: {OURS}" in lines
    summary = json.loads(lines[-1])
    assert {key: summary[key] for key in DEMO_GDPO} == DEMO_GDPO
    assert "could not register" not in result.stderr
    return lines[:2]


def fresh(code: str, **env: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter of this environment, with the switches of tests/fixtures/other_verl."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=FRESH_TIMEOUT_S,
                          env={**os.environ, "PYTHONPATH": str(OTHER_VERL), **env})


# ----------------------------------------------------------------------------- the touch points


def test_every_touch_point_of_the_installed_verl_is_as_the_plugin_expects():
    assert [(point.path, found) for point, found in check_all() if found is not None] == []
    assert len({point.path for point in TOUCH_POINTS}) == len(TOUCH_POINTS)


def module_with(**attributes) -> ModuleType:
    module = ModuleType("somewhere")
    module.__dict__.update(attributes)
    return module


class Trainer:
    def step(self, batch, metrics):
        return batch


def test_a_touch_points_shape_is_its_leading_parameters_and_the_names_it_is_called_with():
    point = TouchPoint("somewhere", "Trainer.step", "wraps it", ("self", "batch", "metrics"))
    assert problem(point, module_with(Trainer=Trainer)) is None
    assert problem(point, module_with()) == "is missing"
    assert problem(point, module_with(Trainer=object)) == "is missing"

    class Reordered:
        def step(self, metrics, batch):
            return batch

    assert problem(point, module_with(Trainer=Reordered)) == (
        "takes (self, metrics, batch) where gdpo-verl expects (self, batch, metrics, ...)")

    class More:  # a parameter added after the ones gdpo-verl passes on changes nothing it relies on
        def step(self, batch, metrics, extra=None):
            return batch

    assert problem(point, module_with(Trainer=More)) is None
    keyword = TouchPoint("somewhere", "run", "binds config by name", ("data",), keywords=("config",))
    assert problem(keyword, module_with(run=lambda data, config=None: data)) is None
    assert "expects (data, ..., config=)" in problem(keyword, module_with(run=lambda data, conf=None: data))
    registry = TouchPoint("somewhere", "REGISTRY", "puts its estimator there", None, kind=dict)
    assert problem(registry, module_with(REGISTRY={})) is None
    assert problem(registry, module_with(REGISTRY=[])) == "is a list, not a dict"
    assert problem(keyword, module_with(run=5)) == "is not a function (int)"


@pytest.fixture
def restore_registry():
    yield
    core_algos.ADV_ESTIMATOR_REGISTRY["gdpo"] = compute_gdpo_advantage
    for name in CORRGRPO_NAMES:  # a failed register() leaves refusing entries there too
        core_algos.ADV_ESTIMATOR_REGISTRY[name] = compute_corrgrpo_advantage


def test_a_changed_touch_point_at_import_verl_leaves_a_gdpo_that_refuses(restore_registry, monkeypatch):
    monkeypatch.setattr(core_algos, "get_adv_estimator_fn", lambda name, added: None)
    with pytest.raises(VerlChanged, match=rf"^gdpo-verl cannot run on verl {re.escape(VERSION)}: "
                                          r"verl\.trainer\.ppo\.core_algos\.get_adv_estimator_fn takes \(name, added\) "
                                          r"where gdpo-verl expects \(name_or_enum, \.\.\.\)"):
        plugin.register()
    # verl swallows the entry point's exception: the registry's "gdpo" must not be verl's built-in then
    estimator = core_algos.ADV_ESTIMATOR_REGISTRY["gdpo"]
    assert estimator not in (compute_gdpo_advantage, core_algos.compute_gdpo_outcome_advantage)
    with pytest.raises(RuntimeError, match="failed to register its estimator.*get_adv_estimator_fn takes"):
        estimator(token_level_rewards=None, response_mask=None)
    with pytest.raises(RuntimeError, match="adv_estimator=grpo_covariance_coefficient: gdpo-verl failed to register"):
        core_algos.ADV_ESTIMATOR_REGISTRY["grpo_covariance_coefficient"](token_level_rewards=None, response_mask=None)


CHANGED = [
    # (module, touch point, change, what imports it): the two examples, and the reward manager's base
    ("verl.trainer.ppo.v1.trainer_base", "PPOTrainer._compute_advantage", "parameter",
     "from verl.trainer.ppo.v1 import trainer_base"),
    ("verl.experimental.reward_loop.reward_manager.naive", "NaiveRewardManager.__init__", "parameter",
     "import verl.experimental.reward_loop.reward_manager"),
    # the base of verl's experimental trainers, imported by their entry points
    ("verl.experimental.separation.ray_trainer", "SeparateRayPPOTrainer._fit_compute_advantage", "parameter",
     "import verl.experimental.one_step_off_policy.ray_trainer"),
    # a method of a Ray actor class (@ray.remote class FullyAsyncTrainer), checked on the class it was made from
    ("verl.experimental.fully_async_policy.fully_async_trainer", "FullyAsyncTrainer.load_checkpoint", "parameter",
     "import verl.experimental.fully_async_policy.fully_async_trainer"),
]


@pytest.mark.parametrize(("module", "name", "how", "imports"), CHANGED)
def test_a_verl_whose_trainer_touch_point_changed_is_refused_with_one_line_naming_it(module, name, how, imports):
    result = fresh(f"import verl\n{imports}\n", CHANGED_VERL=f"{module}:{name}:{how}")
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"gdpo_verl.verl_adapter.touch_points.VerlChanged: gdpo-verl cannot run on verl {VERSION}: "
                           f"{module}.{name} "), last


def test_a_verl_whose_estimator_registry_changed_shape_is_refused_at_import_verl():
    result = fresh("import verl\nprint('imported')\n", CHANGED_VERL="verl.trainer.ppo.core_algos:ADV_ESTIMATOR_REGISTRY:list")
    assert result.returncode == 0, result.stderr  # verl's plugin loader swallows it; the plugin's ERROR line does not
    assert ("gdpo-verl: could not register the 'gdpo' advantage estimator: VerlChanged(\"gdpo-verl cannot run on verl "
            f"{VERSION}: verl.trainer.ppo.core_algos.ADV_ESTIMATOR_REGISTRY is a list, not a dict") in result.stderr


# ----------------------------------------------------------------------------- verl from source


def rebuilt_verl_wheel(directory: Path, version: str) -> Path:
    """A wheel of the installed verl's package under ``version`` (its METADATA and verl/version/version), as a
    build of verl's repository would report it; the rest of the distribution (its ``scripts`` folder) left out."""
    installed = distribution("verl")
    name = f"verl-{version}.dist-info"
    wheel = directory / f"verl-{version}-py3-none-any.whl"
    records = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in installed.files:
            parts = file.parts
            if "__pycache__" in parts or parts[0] not in ("verl", f"verl-{installed.version}.dist-info"):
                continue
            if parts[0] != "verl":
                if parts[-1] in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json"):
                    continue
                arcname = "/".join([name, *parts[1:]])
            else:
                arcname = "/".join(parts)
            data = Path(file.locate()).read_bytes()
            if arcname == "verl/version/version" or arcname == f"{name}/METADATA":
                text = data.decode()
                data = (version if arcname.startswith("verl/") else
                        text.replace(f"\nVersion: {installed.version}\n", f"\nVersion: {version}\n", 1)).encode()
            archive.writestr(arcname, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            records.append(f"{arcname},sha256={digest},{len(data)}")
        records.append(f"{name}/RECORD,,")
        archive.writestr(f"{name}/RECORD", "\n".join(records) + "\n")
    return wheel


def test_a_verl_built_from_source_installs_beside_the_plugin_without_pip_replacing_it_and_gdpo_runs(tmp_path):
    # Before: gdpo-verl asked for verl<0.10, so pip replaced a verl built from source (0.10.0.dev0) with 0.9.1 from
    # the index, and the plugin refused 0.10.0.dev0 at import verl.
    wheel = rebuilt_verl_wheel(tmp_path, "0.10.0.dev0")
    # A fresh environment that sees this one's packages (torch, Ray, ... and pip) behind its own: the rebuilt verl
    # goes into its own site-packages, in front of the 0.9.1 that this one holds; pip resolves against both.
    venv = tmp_path / "venv"
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    own = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip())
    (own / "behind.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    # pip as a user's machine has it: none of this machine's pip configuration (indexes, find-links, constraints)
    quiet_pip = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}

    def pip(*arguments: str) -> subprocess.CompletedProcess:
        return subprocess.run([python, "-m", "pip", "--disable-pip-version-check", *arguments], capture_output=True,
                              text=True, timeout=600, cwd=tmp_path, env={**quiet_pip, "PIP_CONFIG_FILE": os.devnull})

    installed = pip("install", "--no-index", "--no-deps", "--ignore-installed", str(wheel))
    assert installed.returncode == 0, installed.stderr
    # the plugin as a user installs it next to their verl; nothing is fetched (--no-index): a pin that left out
    # 0.10.0.dev0 could not be met and pip would stop here
    report = tmp_path / "report.json"
    plugin_install = pip("install", "--no-index", "--no-build-isolation", "--report", str(report), "-e", str(ROOT))
    assert plugin_install.returncode == 0, plugin_install.stdout[-2000:] + plugin_install.stderr[-3000:]
    assert [item["metadata"]["name"] for item in json.loads(report.read_text())["install"]] == ["gdpo-verl"]

    demo = subprocess.run([python, "-c", DEMO], capture_output=True, text=True, timeout=FRESH_TIMEOUT_S, cwd=tmp_path)
    versions, location = demo_ran_the_plugins_gdpo(demo)
    assert versions.startswith(f"verl 0.10.0.dev0 0.10.0.dev0 {own}"), versions
    assert location == f"gdpo_verl {ROOT / 'gdpo_verl' / '__init__.py'}"


# ----------------------------------------------------------------------------- no TransferQueue


def test_without_transfer_queue_the_plugin_loads_and_gdpo_runs_through_verls_compute_advantage(tmp_path):
    record = tmp_path / "refused.txt"
    result = fresh("import importlib.util\nassert importlib.util.find_spec('transfer_queue') is None\n" + DEMO,
                   NO_TRANSFER_QUEUE=str(record))
    demo_ran_the_plugins_gdpo(result)
    assert record.read_text().split()[1] == "transfer_queue"  # the switch was on


def test_without_transfer_queue_the_v1_trainer_is_refused_before_ray_starts(tmp_path):
    # Before: verl's TaskRunner failed on `import transfer_queue` once Ray and its workers had started.
    result = subprocess.run(
        [sys.executable, "-m", "verl.trainer.main_ppo", "algorithm.adv_estimator=gdpo",
         "+algorithm.gdpo_reward_keys=[correct,length]"],
        capture_output=True, text=True, timeout=FRESH_TIMEOUT_S, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(OTHER_VERL), "NO_TRANSFER_QUEUE": str(tmp_path / "refused.txt")})
    assert result.returncode != 0
    assert ("trainer.use_v1=true (verl's default) trains with verl's V1 trainer, which keeps its samples in "
            "TransferQueue, and transfer_queue cannot be imported here") in result.stderr
    assert "ray init kwargs" not in result.stdout  # main_ppo prints this right before ray.init()


def test_the_legacy_trainer_needs_no_transfer_queue(monkeypatch):
    from hydra import compose, initialize_config_module

    with initialize_config_module("gdpo_verl.config", version_base=None):
        config = compose("gdpo_trainer", overrides=["algorithm.gdpo_reward_keys=[correct,length]"])
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "transfer_queue" else real(name, *args))
    config.trainer.use_v1 = False
    assert check_config(config) is not None
    config.trainer.use_v1 = True
    with pytest.raises(ValueError, match=r"or train with verl's legacy trainer: trainer\.use_v1=false"):
        check_config(config)


@pytest.mark.parametrize(("trainer", "config_name"), [("one_step_off_policy", "one_step_off_ppo_trainer"),
                                                     ("fully_async_policy", "fully_async_ppo_trainer")])
def test_verls_experimental_trainers_need_no_transfer_queue(monkeypatch, trainer, config_name):
    # their configs keep ppo_trainer.yaml's trainer.use_v1=true, but their trainers (on SeparateRayPPOTrainer) keep
    # samples in DataProto: verl's own config of each, with gdpo-verl's settings as its entry point takes them, passes
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(str(Path(verl.__file__).parent / "experimental" / trainer / "config"), version_base=None):
        config = compose(config_name, overrides=["hydra.searchpath=[pkg://verl.trainer.config,pkg://gdpo_verl.config]",
                                                 "+gdpo=settings", "algorithm.gdpo_reward_keys=[correct,length]"])
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "transfer_queue" else real(name, *args))
    assert config.trainer.use_v1 and config.algorithm.adv_estimator == "gdpo"
    assert check_config(config) is not None


def test_the_doctor_on_a_verl_without_transfer_queue_warns_and_still_checks_the_rest(tmp_path):
    checks = ("from gdpo_verl.verl_adapter.for_tools.environment import check_fresh_process, check_transfer_queue, "
              "check_verl_version\n"
              "for check in (check_verl_version, check_fresh_process, check_transfer_queue):\n"
              "    found = check()\n"
              "    print(found.status, found.name, found.detail, sep=' | ')\n")
    result = fresh(checks, NO_TRANSFER_QUEUE=str(tmp_path / "refused.txt"))
    assert result.returncode == 0, result.stderr[-3000:]
    verl_check, fresh_process, transfer_queue = result.stdout.strip().splitlines()[-3:]
    # the V1 trainer's touch point is left to the TransferQueue check: its module cannot be imported
    assert verl_check.startswith(f"OK | verl | {VERSION} (the {len(TOUCH_POINTS) - 1} touch points"), verl_check
    assert fresh_process.startswith("OK | ") and "the V1 trainer needs TransferQueue" in fresh_process
    assert transfer_queue.startswith("WARN | TransferQueue | missing; ") and "trainer.use_v1=false" in transfer_queue
