"""What one run may use (``Limits``), each checked once, when it is given, and the memory bound of a run's cgroup
that follows from them."""

from __future__ import annotations

from dataclasses import dataclass, fields

# Kernel memory a run may hold beside its address space and its files, in its cgroup's bound: its page tables,
# pipe buffers, descriptors and the slab of its files (about 1 KB a file or directory); and the slot's spawner
# (about 2 MB charged to the cgroup).
KERNEL_MB = 64
# The session's interpreter, whose pages its runs share until they write them (about 7 MB of its own: the run
# gets memory_mb x processes beside it, as a run started alone did).
INTERPRETER_MB = 16


@dataclass(frozen=True)
class Limits:
    """What one run of a program may use.

    Attributes:
        wall_s: seconds from start to end, start-up included; then the sandbox is killed.
        cpu_s: CPU seconds of the run, all its processes together, counted by the host; and its own time: the wall
            clock less the time it waited for a CPU (a program that sleeps holds its slot as one that computes).
        memory_mb: address space of each process (``RLIMIT_AS``).
        processes: processes and threads the program may have at once, itself included (``RLIMIT_NPROC``).
        file_mb: size of the writable directory (a tmpfs), and of any file written (``RLIMIT_FSIZE``).
        output_kb: stdout and stderr read back, each; more stops the run (``OUTPUT_LIMIT``).

    Every limit but ``wall_s`` is a whole number: ``1.0`` (as YAML or a command line may give it) is taken as 1,
    ``1.5`` is refused.
    """

    wall_s: float = 10.0
    cpu_s: int = 5
    memory_mb: int = 1024
    processes: int = 4
    file_mb: int = 16
    output_kb: int = 4096

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
                raise ValueError(f"sandbox limit {field.name} must be a positive number; got {value!r}.")
            if field.name == "wall_s":
                object.__setattr__(self, field.name, float(value))
            elif float(value).is_integer():
                object.__setattr__(self, field.name, int(value))
            else:
                raise ValueError(f"sandbox limit {field.name} must be a whole number; got {value!r}.")

    @property
    def cgroup_bytes(self) -> int:
        """What a run's cgroup holds at most: its processes' address spaces, its files, kernel memory and the
        session's interpreter."""
        return (self.memory_mb * self.processes + self.file_mb + KERNEL_MB + INTERPRETER_MB) * 2**20
