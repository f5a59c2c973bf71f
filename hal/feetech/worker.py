"""The Feetech backend's bus thread: jobs run one after the other, in the order queued.

A goal write is a job like any other: the caller encodes the packet and queues it
without waiting, and the next call (a read) queues behind it, so the bus order is
read, write, read, write. A failed write is raised by the backend's next call.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any, TypeVar

T = TypeVar("T")
_Job = tuple[Callable[[], Any], asyncio.AbstractEventLoop | None, "asyncio.Future[Any] | None"]


def _settle(future: asyncio.Future[T], result: T | None, exc: BaseException | None) -> None:
    if future.done():  # the caller timed out or was cancelled
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)  # type: ignore[arg-type]  # None only with exc


class FeetechWorker:
    """One daemon thread running bus jobs in order.

    Args:
        name: the thread's name.
        on_error: called on the thread with the exception of a job nobody awaits
            (a queued goal write).
    """

    def __init__(self, name: str, on_error: Callable[[BaseException], None]) -> None:
        self._jobs: SimpleQueue[_Job | None] = SimpleQueue()
        self._on_error = on_error
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def call(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        """Queue ``fn``; the returned future (on the running loop) completes with its outcome."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put((fn, loop, future))
        return future

    def post(self, fn: Callable[[], object]) -> None:
        """Queue ``fn`` without waiting for it; its failure goes to ``on_error``."""
        self._jobs.put((fn, None, None))

    def stop(self) -> None:
        """End the thread once the jobs queued so far have run."""
        self._jobs.put(None)

    def join(self, timeout: float) -> None:
        """Wait up to ``timeout`` [s] for the thread to end."""
        self._thread.join(timeout)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, loop, future = job
            try:
                outcome: tuple[Any, BaseException | None] = (fn(), None)
            except BaseException as exc:  # handed to whoever waits, whatever it is
                outcome = (None, exc)
            if future is None or loop is None:
                if outcome[1] is not None:
                    self._on_error(outcome[1])
                continue
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
                loop.call_soon_threadsafe(_settle, future, *outcome)
