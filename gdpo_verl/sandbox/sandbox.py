"""``Sandbox``: runs programs in slots, each run in the sandbox of its mode, with its limits; checks a node before
any model is loaded (``Sandbox.check``). It puts together what each of its parts does: ``node.py`` (what the node
gives the runs, and its check), ``slots.py`` (the slots), ``guardian.py`` (the process that ends runs still
starting when the host dies) and ``session.py`` (the runs of one program)."""

from __future__ import annotations

import threading
import time

from gdpo_verl.sandbox.cgroups import TEARDOWN_S
from gdpo_verl.sandbox.guardian import Guardian
from gdpo_verl.sandbox.limits import Limits
from gdpo_verl.sandbox.node import Node
from gdpo_verl.sandbox.outcome import Outcome, unavailable
from gdpo_verl.sandbox.session import Session
from gdpo_verl.sandbox.slots import Slots


class Sandbox:
    """Runs programs in the sandbox of ``mode`` with ``limits``; up to ``slots`` at once (``run`` from several
    threads; a call waits for a free slot for at most ``limits.wall_s``, then counts as ``UNAVAILABLE``).

    Args:
        mode: ``"local"`` (bubblewrap) or ``"none"`` (limits only, no isolation: trusted machines).
        limits: what one run may use.
        python: the interpreter that runs the programs (default: ``host.default_python``); in local mode a copy of
            it and its standard library is what the sandbox shows of the system (``image.py``).
        slots: runs at once.
        isolation: ``"strict"`` (a user id and a cgroup of its own per slot; root and a writable cgroup needed) or
            ``"relaxed"`` (what the node gives).
    """

    def __init__(self, mode: str = "local", limits: Limits | None = None, python: str | None = None,
                 slots: int = 1, isolation: str = "strict") -> None:
        self.limits = limits or Limits()
        self.node = Node(mode, isolation, self.limits, python, slots)
        self.mode, self.isolation, self.slots, self.python = mode, isolation, slots, self.node.python
        self._slots = Slots(slots, self.limits.wall_s)
        self._lock = threading.Lock()
        self._guardian: Guardian | None = None  # root, local mode: started with the first session

    def check(self) -> None:
        """Run ``print(1)`` in the sandbox; raise ``SandboxUnavailable`` naming the node's problem and the fix."""
        self.node.check(self.run)

    def refusal(self) -> str:
        """Why this node cannot run the sandbox as asked (empty: it can): ``Node.refusal``."""
        return self.node.refusal()

    def uid(self, slot: int) -> int | None:
        """The user id of ``slot``'s runs: one of its own when this process is root, else this process's (None)."""
        return self.node.uid(slot)

    def close(self) -> None:
        """Remove this sandbox's cgroups (strict isolation) and stop its guardian; call when no run is under way."""
        with self._lock:
            if self._guardian is not None:
                self._guardian.stop()
                self._guardian = None
            if self.node.cgroups is not None:
                self.node.cgroups.remove()
                self.node.cgroups = None

    def run(self, code: str, stdin: str, argv: tuple[str, ...] = ()) -> Outcome:
        """Run the Python program ``code`` with ``stdin`` as its standard input (and ``argv`` as its arguments): a
        session of one run."""
        with self.session(code) as session:
            return session.run(stdin, argv)

    def session(self, code: str, wait: bool = True) -> Session | None:
        """A session that runs the Python program ``code`` on as many inputs as asked (``Session.run``), one at a
        time, in one slot, which it holds until it is closed (use it as a context manager). ``wait``: wait for a
        free slot for at most ``limits.wall_s`` (then every run of the session is ``UNAVAILABLE``); False: None at
        once when no slot is free."""
        waited = time.monotonic()
        refusal = self.node.refusal()
        if refusal:
            return self._failed(code, unavailable(refusal))
        if self.node.root and self.mode == "local":
            with self._lock:
                if self._guardian is None:
                    try:
                        self._guardian = Guardian(self.node.uid_base, self.slots)
                    except OSError as error:
                        return self._failed(code, unavailable(f"could not start the sandbox's guardian: {error}"))
        # slots held by sessions whose runs go on ending are busy, not stuck: wait while any run ends
        slot = self._slots.take(wait, stalled_s=self.limits.wall_s + TEARDOWN_S)
        if slot is not None:
            return Session(self.node, self._slots, code, slot)
        if not wait:
            return None
        return self._failed(code, unavailable(
            f"no sandbox slot came free within {time.monotonic() - waited:.0f} s, and no run of this sandbox ended "
            f"for {self._slots.idle_seconds():.0f} s", time.monotonic() - waited))

    def _failed(self, code: str, failed: Outcome) -> Session:
        """A session holding no slot, every run of which is ``failed``."""
        return Session(self.node, self._slots, code, None, failed)
