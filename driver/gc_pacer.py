"""Garbage collection in the control loop's idle time, not in the middle of a cycle.

CPython's cyclic collector runs whenever allocations pass a threshold, wherever that
happens: inside a cycle, between the ticker's wake-up and the deadline. Measured on the
sim backend at 500 Hz (WidowX, IK on the arm chain): young collections took 120-160 µs
and a full collection 13-34 ms (the URDF model, solvers, numpy and asyncio all live on
the heap), so a full collection alone cost 7-17 ticks.

:class:`GcPacer` instead, while the loop runs:

- collects once and freezes everything alive at start-up (``gc.freeze``): modules,
  models and solvers are never scanned again, so a full collection only walks what
  was allocated since;
- disables automatic collection, and runs the generation CPython would have run
  (same thresholds) right after a cycle, when the next deadline is far enough away;
- collects anyway when garbage piles up (a loop with no idle time must not leak).

Several runtimes in one process share the setting; the last one to stop restores it.
"""

from __future__ import annotations

import gc
import threading

#: [s] least time left before the next deadline for a collection in the idle time.
MIN_IDLE = 400e-6
#: collect even without idle time once gen-0 allocations pass this many thresholds.
FORCE_FACTOR = 8


class GcPacer:
    """Takes over automatic garbage collection while a control loop runs."""

    _users = 0
    _was_enabled = True
    _lock = threading.Lock()

    def __init__(self) -> None:
        self._active = False
        self.collections = [0, 0, 0]  # per generation, run by this pacer

    def start(self) -> None:
        """Collect, freeze the survivors, and switch automatic collection off."""
        if self._active:
            return
        with GcPacer._lock:
            if GcPacer._users == 0:
                GcPacer._was_enabled = gc.isenabled()
                gc.collect()
                gc.freeze()
                gc.disable()
            GcPacer._users += 1
        self._active = True

    def stop(self) -> None:
        """Give the heap back to CPython's collector (the last user unfreezes it)."""
        if not self._active:
            return
        self._active = False
        with GcPacer._lock:
            GcPacer._users -= 1
            if GcPacer._users == 0:
                gc.unfreeze()
                if GcPacer._was_enabled:
                    gc.enable()

    def idle(self, time_left: float) -> int:
        """Run a due collection if ``time_left`` [s] before the next deadline allows.

        Returns the generation collected, or -1 when none ran.
        """
        if not self._active:
            return -1
        count0, count1, count2 = gc.get_count()
        t0, t1, t2 = gc.get_threshold()
        if t0 <= 0 or count0 < t0:
            return -1
        if time_left < MIN_IDLE and count0 < FORCE_FACTOR * t0:
            return -1
        generation = 2 if count2 >= t2 else 1 if count1 >= t1 else 0
        gc.collect(generation)
        self.collections[generation] += 1
        return generation
