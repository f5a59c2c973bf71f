"""The bus thread of every serial-bus backend: jobs run in the order they were queued.

While goals stream, the backend's queue holds ``read k`` (on the wire), ``write k-1``
and ``read k+1``. The thread keeps the bus busy across them:

* a goal write queued right behind a cycle read goes out as soon as that read's reply
  has fully arrived, before the reply is decoded (the bus's ``on_reply``);
* when the next job is another cycle read, the state just read is handed to the event
  loop only once that read's instruction is out (the bus's ``on_sent``): waking the
  loop first would let it take the interpreter lock for its whole cycle while the bus
  waits for the instruction.

Neither changes the order of transactions, which stays the queue's; only the waits
between them are shorter.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from queue import SimpleQueue
from typing import Any, Generic, Protocol, TypeVar

T = TypeVar("T")


class WorkerBus(Protocol):
    """What the bus thread needs of a bus: its hooks around a cycle read, a raw send."""

    on_reply: Callable[[], None] | None
    on_sent: Callable[[], None] | None

    def send_sync_write(self, wire: bytes) -> None:
        """Write a packet that has no reply."""


_Outcome = tuple[Any, BaseException | None]


def _settle(future: asyncio.Future[T], result: T | None, exc: BaseException | None) -> None:
    """Complete ``future`` on its loop with the bus thread's outcome (unless cancelled)."""
    if future.done():  # the caller timed out or was cancelled
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)  # type: ignore[arg-type]  # None only with exc


class GoalWrite:
    """A goal packet, encoded on the caller's side, waiting for the bus thread to send it."""

    __slots__ = ("future", "sent", "wire")

    def __init__(self, wire: bytes) -> None:
        self.wire = wire
        self.future: Future[None] = Future()  # done once sent (or failed to)
        self.sent = False  # only the bus thread reads and sets it


class BusCall(Generic[T]):
    """``fn(*args)`` to run on the bus thread; its outcome completes ``done`` on ``loop``.

    ``cycle`` marks the cycle's state read: writes queued behind it may go out before
    its reply is decoded, and its outcome may be held until the next read is on the wire.
    """

    __slots__ = ("args", "cycle", "done", "fn", "loop")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, fn: Callable[..., T], args: tuple[object, ...]
    ) -> None:
        self.loop = loop
        self.fn = fn
        self.args = args
        self.cycle = False
        self.done: asyncio.Future[T] = loop.create_future()


_Job = BusCall[Any] | GoalWrite | None  # None stops the thread


class BusWorker:
    """One thread that runs bus jobs in order (see the module docstring).

    Args:
        bus: the bus the jobs use; its ``on_reply``/``on_sent`` hooks are set per job.
        name: the thread's name.
    """

    def __init__(self, bus: WorkerBus, name: str) -> None:
        self._bus = bus
        self._jobs: deque[_Job] = deque()  # append (any thread) and popleft are atomic
        self._tokens: SimpleQueue[None] = SimpleQueue()  # one per job: the thread blocks on it
        self._held: tuple[BusCall[Any], _Outcome] | None = None  # outcome not yet handed over
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, job: BusCall[Any] | GoalWrite) -> None:
        """Queue ``job`` behind every job queued before it."""
        self._jobs.append(job)
        self._tokens.put(None)

    def stop(self) -> None:
        """End the thread once the jobs queued so far have run."""
        self._jobs.append(None)
        self._tokens.put(None)

    def _run(self) -> None:
        jobs, tokens, bus = self._jobs, self._tokens, self._bus
        while True:
            tokens.get()
            job = jobs.popleft()
            if job is None:
                self._release()
                return
            if isinstance(job, GoalWrite):
                self._send(job)
                continue
            if job.cycle:
                bus.on_reply = self._send_next_writes
                bus.on_sent = self._release
            try:
                outcome: _Outcome = (job.fn(*job.args), None)
            except BaseException as exc:  # handed to the awaiting task, whatever it is
                outcome = (None, exc)
            finally:
                bus.on_reply = bus.on_sent = None
            self._release()  # still held if this read failed before its instruction went out
            if job.cycle and self._cycle_read_next():
                self._held = (job, outcome)
            else:
                _post(job, outcome)

    def _release(self) -> None:
        """Hand the held outcome to its loop (the next read's instruction is out)."""
        held, self._held = self._held, None
        if held is not None:
            _post(*held)

    def _cycle_read_next(self) -> bool:
        """Whether the next job but goal writes is a cycle read."""
        jobs, i = self._jobs, 0
        while True:
            try:
                job = jobs[i]  # indexing, not iterating: other threads append meanwhile
            except IndexError:
                return False
            if not isinstance(job, GoalWrite):
                return job is not None and job.cycle
            i += 1

    def _send_next_writes(self) -> None:
        """Within a cycle read: send the writes queued right behind it, up to any other job."""
        jobs, i = self._jobs, 0
        while True:
            try:
                job = jobs[i]
            except IndexError:
                return
            if not isinstance(job, GoalWrite):
                return
            self._send(job)
            i += 1

    def _send(self, job: GoalWrite) -> None:
        if job.sent:
            return
        job.sent = True
        # From here on the future cannot be cancelled; False: it already was (a caller
        # waiting on it was cancelled). The goal still goes out, and nobody is told.
        waited_for = job.future.set_running_or_notify_cancel()
        try:
            self._bus.send_sync_write(job.wire)
        except BaseException as exc:  # handed to the caller by the next backend call
            if waited_for:
                job.future.set_exception(exc)
        else:
            if waited_for:
                job.future.set_result(None)


def _post(job: BusCall[Any], outcome: _Outcome) -> None:
    with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
        job.loop.call_soon_threadsafe(_settle, job.done, *outcome)
