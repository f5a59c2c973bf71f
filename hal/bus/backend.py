"""The lifecycle every serial-bus backend shares: open, calls on the bus thread, goals, close.

A family's backend (``DynamixelBackend``, ``FeetechBackend``) subclasses
:class:`BusBackend` and gives it a bus and a session: ``_open_session`` runs start-up on
the bus thread, ``_read_state`` one cycle's read, ``_close_session(torque_off)`` the
shutdown. What is common lives here, once:

* every call runs on the one bus thread (:mod:`hilbot.hal.bus.worker`) and is awaited
  under ``io_timeout``; a deadline that passes raises ``CommTimeout``;
* a goal packet is encoded by the caller and queued without waiting for the wire
  (:meth:`_queue_goal`): at most one is queued, a failure to send it is raised by the
  next call, and a caller cancelled while waiting behind it still has its goal sent
  (the thread never settles a future nobody waits for);
* pipelining (``pipeline``): while goals stream, ``read()`` queues the next cycle's read
  before returning the one it queued a call earlier (see ``DynamixelBackend``); any
  other call drops a read queued ahead, so what it reads is fresh;
* ``close()`` turns torque off (``torque_off_on_exit``) without waiting behind a read
  queued ahead, and is idempotent.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Callable
from concurrent.futures import Future
from types import TracebackType
from typing import Any, Final, Literal, TypeVar

from hilbot import _compat_asyncio as aio
from hilbot._compat import Self
from hilbot.hal.backend import BusCounters, JointState
from hilbot.hal.bus.worker import BusCall, BusWorker, GoalWrite, WorkerBus
from hilbot.hal.errors import CommTimeout, HalError, TorqueNotConfirmed
from hilbot.hal.mapping import BusSpec

T = TypeVar("T")
#: ``pipeline="auto"``: pipeline only while the bus, not the loop, limits the rate.
AUTO: Final = "auto"


class BackendState(enum.Enum):
    """Lifecycle of a backend; it is not reentrant."""

    CREATED = "created"
    OPEN = "open"
    CLOSED = "closed"


class BusBackend:
    """The shared lifecycle of a backend on one serial bus (see the module docstring).

    Subclasses call :meth:`_init_bus` from their ``__init__`` and define
    ``_open_session``, ``_read_state`` and ``_close_session``.
    """

    #: the bus thread's name prefix
    thread_prefix = "bus"
    #: a cycle read calls the bus's ``on_reply``/``on_sent`` hooks (see the worker)
    cycle_hooks = True

    spec: BusSpec
    state: BackendState
    pipeline: bool | Literal["auto"]
    io_timeout: float
    torque_off_on_exit: bool
    _log: logging.Logger

    def _init_bus(
        self,
        spec: BusSpec,
        bus: WorkerBus,
        *,
        io_timeout: float,
        torque_off_on_exit: bool,
        pipeline: bool | Literal["auto"],
        log: logging.Logger,
    ) -> None:
        self.spec = spec
        self._bus: Any = bus
        self.io_timeout = io_timeout
        self.torque_off_on_exit = torque_off_on_exit
        self.pipeline = pipeline
        self._log = log
        self.state = BackendState.CREATED
        self._worker: BusWorker | None = None
        self._pending: Future[None] | None = None  # the last queued goal write
        self._write_error: BaseException | None = None  # its failure, raised by the next call
        self._ahead: asyncio.Future[JointState] | None = None  # the read queued in advance
        self._streaming = False  # a goal was queued since the last read()

    # --- what a family gives -------------------------------------------------------------

    def _open_session(self) -> None:
        raise NotImplementedError

    def _read_state(self) -> JointState:
        raise NotImplementedError

    def _close_session(self, torque_off: bool) -> None:
        raise NotImplementedError

    # --- lifecycle ------------------------------------------------------------------------

    @property
    def counters(self) -> BusCounters:
        """A snapshot of the bus counters."""
        counters: BusCounters = self._bus.counters.copy()
        return counters

    async def __aenter__(self) -> Self:
        if self.state is not BackendState.CREATED:
            raise RuntimeError(f"{type(self).__name__} is {self.state.value}; it is not reentrant")
        self._worker = BusWorker(self._bus, f"{self.thread_prefix}-{self.spec.port}")
        try:
            await self._call("open", self._open_session)
        except BaseException:
            await self._shutdown(torque_off=False)
            self.state = BackendState.CLOSED
            raise
        self.state = BackendState.OPEN
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Turn torque off (per ``torque_off_on_exit``) and release the port; idempotent."""
        if self.state is BackendState.CLOSED:
            return
        was_open = self.state is BackendState.OPEN
        self.state = BackendState.CLOSED
        await self._shutdown(torque_off=was_open and self.torque_off_on_exit)

    async def read(self) -> JointState:
        """Read every joint: one cycle's read (pipelined while goals stream, see above).

        Raises:
            CommTimeout, CrcError: a servo did not answer validly after retries.
            ServoError: a servo rejected the read.
        """
        self._require_open()
        if not self.pipeline:
            self._drop_ahead()
            self._raise_pending()
            return await self._finish("read", self._start_read())
        self._raise_pending()
        ahead, self._ahead = self._ahead, None
        streaming, self._streaming = self._streaming, False
        if ahead is None:
            # "auto": the bus is behind when the last write has not even gone out yet
            behind = self._pending is not None and not self._pending.done()
            state = await self._finish("read", self._start_read())
            if streaming and (behind or self.pipeline != AUTO):
                self._ahead = self._start_read()
            return state
        # "auto": a read that finished before it was asked for means the bus is idle
        # between cycles, and reading at once gives a fresher state.
        if streaming and (not ahead.done() or self.pipeline != AUTO):
            # queued before this cycle's write: the bus never waits for the loop
            self._ahead = self._start_read()
        return await self._finish("read", ahead)

    # --- the bus thread -------------------------------------------------------------------

    def _require_open(self) -> None:
        if self.state is not BackendState.OPEN:
            raise RuntimeError(f"{type(self).__name__} is {self.state.value}; use `async with`")

    async def _queue_goal(self, wire: bytes | None) -> None:
        """Queue a goal packet (no reply) behind what is queued; do not wait for the wire.

        ``None``: nothing to send, but the same wait for the previous goal and its error.
        """
        pending = self._pending
        if pending is not None and not pending.done():
            # back-pressure: at most one queued write, so a caller faster than the bus
            # waits here instead of piling packets up
            with contextlib.suppress(Exception):
                # cancelled here, the goal's future is cancelled too: the bus thread
                # still sends it, without settling it (worker.BusWorker._send)
                await asyncio.wrap_future(pending)
        self._raise_pending()
        if wire is None or self._worker is None:
            return
        job = GoalWrite(wire)
        job.future.add_done_callback(self._note_write)
        self._pending = job.future
        self._worker.submit(job)
        self._streaming = True

    async def _call(
        self, what: str, fn: Callable[..., T], *args: object, timeout: float | None = None
    ) -> T:
        self._drop_ahead()  # a state read before this call must not come after it
        self._raise_pending()
        return await self._finish(what, self._start(fn, *args), timeout)

    def _drop_ahead(self) -> None:
        """Drop a read queued in advance: it still runs on the bus thread, nobody waits.

        A shutdown or a torque-off never waits behind it (a wait that a Ctrl-C cancels
        would leave torque on).
        """
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            ahead.cancel()

    def _start(self, fn: Callable[..., T], *args: object) -> asyncio.Future[T]:
        """Queue ``fn(*args)`` on the bus thread; its outcome comes back in one hop.

        The bus thread hands it straight to the loop with one ``call_soon_threadsafe``
        (``run_in_executor`` chains a concurrent future into an asyncio one: two more
        callbacks and a lock per call).
        """
        return self._submit(BusCall(asyncio.get_running_loop(), fn, args))

    def _start_read(self) -> asyncio.Future[JointState]:
        """Queue the cycle's read (see :mod:`hilbot.hal.bus.worker`).

        With ``cycle_hooks``, the goal write queued behind it goes out as soon as its
        reply is in, and its state may wait for the next read to be on the wire.
        """
        call = BusCall(asyncio.get_running_loop(), self._read_state, ())
        call.cycle = self.cycle_hooks
        return self._submit(call)

    def _submit(self, call: BusCall[T]) -> asyncio.Future[T]:
        if self._worker is None:
            raise RuntimeError(f"{type(self).__name__} has no bus thread")
        self._worker.submit(call)
        return call.done

    async def _finish(self, what: str, done: asyncio.Future[T], timeout: float | None = None) -> T:
        """Await a job queued by ``_start`` under the I/O deadline."""
        if done.done():  # a pipelined read that is already in: no deadline to arm
            result = done.result()
            self._raise_pending()
            return result
        try:
            async with aio.timeout(timeout or self.io_timeout):
                result = await done
        except TimeoutError as exc:
            if isinstance(exc, HalError):
                raise
            raise CommTimeout(None, what) from exc
        self._raise_pending()
        return result

    def _note_write(self, done: Future[None]) -> None:
        """Keep the first failure of a queued write (runs on the bus thread)."""
        if done.cancelled():
            return
        exc = done.exception()
        if exc is not None and self._write_error is None:
            self._write_error = exc

    def _raise_pending(self) -> None:
        """Raise the failure of a queued write, once."""
        exc, self._write_error = self._write_error, None
        if exc is not None:
            raise exc

    async def _shutdown(self, *, torque_off: bool) -> None:
        self._drop_ahead()
        if self._worker is None:
            return
        try:
            closing = self._start(self._close_session, torque_off)
            async with aio.timeout(self.io_timeout):
                await closing
        except TorqueNotConfirmed as exc:  # per servo: which are off, which are not
            self._log.error("%s: closing, torque off: %s", self.spec.port, exc)
        except (HalError, TimeoutError) as exc:
            self._log.warning("%s: closing: %s", self.spec.port, exc)
        finally:
            worker, self._worker = self._worker, None
            worker.stop()
