"""Which processes of a training run are its parts, whose death the supervisor (``supervise.py``) names: a Ray
actor, Ray's raylet and GCS, vLLM's engine core and workers; not a Ray task's worker, a pooled idle worker, or a
helper forked from a part that still carries the part's title, which may end whenever its work is done."""
from __future__ import annotations

import os
from dataclasses import dataclass

import psutil

# Ray processes that are not parts of the run (their end is no death): pooled idle workers come and go; the agents
# are Ray's own. Their work still counts as the run's (note_work).
RAY_NOT_PARTS = ("ray::IDLE", "ray::DashboardAgent", "ray::RuntimeEnvAgent")

PARTS = {  # what a process title stands for, in the stop message
    "VLLM::EngineCore": "the vLLM engine core",
    "VLLM::Worker": "a vLLM worker",
    "ray::vLLMHttpServer": "the vLLM rollout server",
}


@dataclass(frozen=True)
class Part:
    pid: int
    created: float
    title: str

    @property
    def description(self) -> str:
        for prefix, meaning in PARTS.items():
            if self.title.startswith(prefix):
                return meaning
        if self.title.startswith("ray::"):
            return f"Ray actor {self.title.removeprefix('ray::').split('.')[0]}"
        return f"Ray's {self.title}"

    def alive(self) -> bool:
        try:
            process = psutil.Process(self.pid)
            return process.create_time() == self.created and process.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False


def part_title(process: psutil.Process) -> str | None:
    """The title under which a process is a part of the run, or None. A process forked from its parent that still
    carries its parent's title (a helper of a Ray actor's or a vLLM process's own) is no part of its own: it may
    end whenever its work is done. Raises psutil.NoSuchProcess (ZombieProcess included) when the process, or the
    parent it is compared with, ended meanwhile: that says nothing of what it was."""
    try:
        cmdline = process.cmdline()
        if not cmdline:  # a process of the run that is exiting: its memory is gone before it is a zombie
            raise psutil.NoSuchProcess(process.pid)
        parent = process.parent()
        if parent is not None and parent.cmdline() == cmdline:
            return None
    except psutil.AccessDenied:
        return None  # its title cannot be read: not taken for a part
    title = " ".join(cmdline).strip()
    if title.startswith("VLLM::") or title.startswith(tuple(PARTS)):
        return title.split()[0]
    if title.startswith("ray::") and not title.startswith(RAY_NOT_PARTS) and title[5:6].isupper():
        return title.split()[0]  # an actor (ray::Class or ray::Class.method); ray::function is a task's worker
    executable = os.path.basename(cmdline[0])
    if executable in ("raylet", "gcs_server"):
        return executable
    return None
