"""A test-only switch that makes the main job's start-up slow where verl's TaskRunner is born: with
``SLOW_ACTOR_START=<class>:<seconds>:<record.json>`` set and this folder first on PYTHONPATH, the first Ray worker
that loads the actor class ``<class>`` spends ``<seconds>`` of wall-clock time computing before loading it, while
Ray still titles it ``ray::IDLE`` (as it does while a real worker imports verl, torch and vLLM for that class). It
writes what it did to ``record.json``: the test reads it to know the slow start-up really happened.

Python imports ``sitecustomize`` at the start of every process; this one does nothing unless the variable is set,
and then only patches Ray's actor-class loader once Ray imports it (``ray._private.function_manager``). Used by
tests/e2e/test_cpu_training.py only; nothing of the product imports it."""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import sys
import time

TARGET = "ray._private.function_manager"


def _slow_down(module) -> None:
    class_name, seconds, record = os.environ["SLOW_ACTOR_START"].split(":", 2)
    manager = module.FunctionActorManager
    load = manager.load_actor_class

    def load_actor_class(self, job_id, descriptor):
        if descriptor.class_name == class_name:
            try:
                claim = os.open(record, os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # the first such worker only
            except FileExistsError:
                claim = None
            if claim is not None:
                title = open(f"/proc/{os.getpid()}/cmdline", "rb").read().replace(b"\0", b" ").decode().strip()
                started, cpu = time.monotonic(), time.process_time()
                while time.monotonic() - started < float(seconds):
                    sum(range(10_000))
                entry = {"pid": os.getpid(), "title": title, "seconds": time.monotonic() - started,
                         "cpu_seconds": time.process_time() - cpu}
                os.write(claim, json.dumps(entry).encode())
                os.close(claim)
        return load(self, job_id, descriptor)

    manager.load_actor_class = load_actor_class


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None:
            return None
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            _slow_down(module)

        spec.loader.exec_module = exec_module
        return spec


if os.environ.get("SLOW_ACTOR_START"):
    sys.meta_path.insert(0, _Finder())
