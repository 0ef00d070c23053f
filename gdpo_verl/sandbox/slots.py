"""``Slots``: which of a sandbox's slots are free, and when a run last ended (a slot's holder making progress)."""

from __future__ import annotations

import queue
import time


class Slots:
    """``count`` slots, each held by one session at a time; a wait for one is bounded by ``wall_s`` while no run
    ends (a run that ends shows that the sessions holding the slots go on)."""

    def __init__(self, count: int, wall_s: float) -> None:
        self.wall_s = wall_s
        self._free: queue.Queue[int] = queue.Queue()
        self.ended = time.monotonic()  # when a run or a session last ended
        for slot in range(count):
            self._free.put(slot)

    def take(self, wait: bool, stalled_s: float) -> int | None:
        """A free slot. None when none is free (``wait`` False), or when none came free and no run ended for over
        ``stalled_s`` (``wait``: the slots are held by sessions that make no progress)."""
        if not wait:
            try:
                return self._free.get(block=False)
            except queue.Empty:
                return None
        while True:
            try:
                return self._free.get(timeout=self.wall_s)
            except queue.Empty:
                if self.idle_seconds() > stalled_s:
                    return None

    def idle_seconds(self) -> float:
        """Seconds since a run or a session last ended."""
        return time.monotonic() - self.ended

    def release(self, slot: int) -> None:
        """A session gives its slot back."""
        self.mark_ended()
        self._free.put(slot)

    def mark_ended(self) -> None:
        """A run or a session ended."""
        self.ended = time.monotonic()
