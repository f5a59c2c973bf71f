"""The teleop worker process: every MQTT byte (and the embedded broker) away from the control loop.

A flood of messages costs this process CPU, not the control process. The worker
parses, validates and conflates, and forwards to the control process only the
newest accepted target per topic, at most once per ``FLUSH_INTERVAL_S``, plus
commands; it publishes the state snapshots the control process sends it.

Started by :func:`hilbot.driver.teleop.serve.serve_isolated` as
``python -m hilbot.driver.teleop.worker FD`` (isolated, on the installed package
only: :mod:`hilbot.driver.child_python`) with one end of a socket pair; its first
line on it names the ``hilbot`` it loaded, and it exits when that socket closes
(its parent died or stopped it).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Mapping
from typing import Any

from hilbot import _compat_asyncio as aio
from hilbot._compat import BaseExceptionGroup
from hilbot.driver.child_python import package_file
from hilbot.driver.runtime.errors import DriverError
from hilbot.driver.teleop.bridge import TeleopBridge
from hilbot.driver.teleop.errors import first_teleop_error
from hilbot.driver.teleop.messages import CommandName, Rejection, RejectReason
from hilbot.driver.teleop.serve import pack, receive, serve_in_process

#: Shortest time between two batches of targets sent to the control process [s].
FLUSH_INTERVAL_S = 0.001
#: How often the worker reports its counters and link state [s].
REPORT_INTERVAL_S = 0.1
#: Why a command got no answer: the control process stopped (or died) first.
CHANNEL_CLOSED = "the control process closed the teleop channel (it is stopping)"


class CommandRefused(DriverError):
    """The control process refused a command; ``reason`` is its explanation."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class RemoteRuntime:
    """The runtime as the worker sees it: targets and commands go to the control process.

    Implements :class:`~hilbot.driver.teleop.bridge.TeleopRuntime`. Targets are
    staged in latest-value slots and sent in batches; ``state()`` is the newest
    snapshot the control process sent.
    """

    def __init__(
        self,
        writer: asyncio.StreamWriter,
        chains: tuple[str, ...],
        joint_names: tuple[str, ...],
        first_state: Mapping[str, Any],
    ) -> None:
        self.chains = chains
        self.joint_names = joint_names
        self.bridge: TeleopBridge | None = None
        self._writer = writer
        self._body: Mapping[str, Any] = first_state
        self._pending: dict[tuple[str, str], tuple[Any, ...]] = {}
        self._flusher: asyncio.Task[None] | None = None
        self._last_flush = 0.0
        self._ids = itertools.count(1)
        self._results: dict[int, asyncio.Future[str | None]] = {}
        self._closed = False

    def _origin(self) -> tuple[str, int | None]:
        return self.bridge.current if self.bridge is not None else ("", None)

    def set_target(self, chain: str, target: Any, *, stamp: float | None = None) -> None:
        """Stage a pose target (replacing a staged one of the same chain)."""
        self._stage(("target", chain), ("target", chain, target, *self._origin(), stamp))

    def set_joint_targets(
        self, positions: Mapping[str, float], *, stamp: float | None = None
    ) -> None:
        """Stage joint targets, merged into staged ones (as the runtime merges them)."""
        staged = self._pending.get(("joints", ""))
        merged = {**staged[1], **positions} if staged is not None else dict(positions)
        self._stage(("joints", ""), ("joints", merged, *self._origin(), stamp))

    def _stage(self, key: tuple[str, str], frame: tuple[Any, ...]) -> None:
        if key in self._pending and self.bridge is not None:
            self.bridge.counters.conflated += 1
        self._pending[key] = frame
        if self._flusher is None or self._flusher.done():
            if time.monotonic() - self._last_flush >= FLUSH_INTERVAL_S:
                self._send_pending()  # now: a lone target never waits for a loop iteration
            self._flusher = asyncio.get_running_loop().create_task(self._flush())

    def _send_pending(self) -> None:
        frames, self._pending = list(self._pending.values()), {}
        if self._writer.transport.is_closing():
            return  # the control process is gone: writing would only log a warning each time
        self._writer.write(b"".join(pack(f) for f in frames))
        self._last_flush = time.monotonic()

    async def _flush(self) -> None:
        """Drain the channel; send what was staged meanwhile, one batch per interval."""
        while True:
            try:
                await self._writer.drain()  # while draining, new targets conflate in _pending
            except ConnectionError:
                return  # the control process is gone; run_worker stops on the closed channel
            if not self._pending:
                return
            wait = self._last_flush + FLUSH_INTERVAL_S - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self._send_pending()

    async def command(self, command: Any) -> None:
        """Ask the control process to run ``command``; raises :class:`CommandRefused`.

        The control process answers every command with one ``result`` frame; should
        the channel close first, :meth:`channel_closed` fails the wait, so it never
        lasts longer than the control process does.
        """
        name = CommandName(command).value
        if self._closed or self._writer.transport.is_closing():
            raise CommandRefused(CHANNEL_CLOSED)
        ident = next(self._ids)
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._results[ident] = future
        self._writer.write(pack(("command", ident, name)))
        try:
            try:
                await self._writer.drain()
            except ConnectionError:
                raise CommandRefused(CHANNEL_CLOSED) from None
            refusal = await future
        finally:
            self._results.pop(ident, None)
        if refusal is not None:
            raise CommandRefused(refusal)

    def channel_closed(self) -> None:
        """The control process closed the channel: fail every command waiting for it."""
        self._closed = True
        for future in self._results.values():
            if not future.done():
                future.set_result(CHANNEL_CLOSED)

    def state(self) -> Mapping[str, Any]:
        """The newest ``state`` body from the control process."""
        return self._body

    def on_frame(self, frame: tuple[Any, ...]) -> None:
        """Apply a frame from the control process."""
        match frame:
            case ("state", body):
                self._body = body
            case ("result", ident, refusal):
                future = self._results.get(ident)
                if future is not None and not future.done():
                    future.set_result(refusal)
            case ("reject", topic, seq, detail, reason) if self.bridge is not None:
                self.bridge.reject(Rejection(RejectReason(reason), detail, topic, seq))
            case _:
                raise ValueError(f"teleop worker: unexpected frame {frame[0]!r}")


async def run_worker(fd: int) -> None:
    """Serve teleop for the control process at the other end of socket ``fd``."""
    sock = socket.socket(fileno=fd)
    reader, writer = await asyncio.open_connection(sock=sock)
    # Say which hilbot this is: the control process sends the settings (the broker's
    # password) only to a worker running its own package (see link._verify_worker).
    writer.write(json.dumps({"hilbot": package_file(), "pid": os.getpid()}).encode() + b"\n")
    try:
        _, init = await receive(reader)
        _, first_state = await receive(reader)
    except (asyncio.IncompleteReadError, ConnectionError):
        return  # the control process stopped (or refused this worker) before it began
    logging.basicConfig(
        level=init["log_level"], format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logger = logging.getLogger("hilbot.driver.teleop.worker")
    settings = init["settings"]
    if settings.worker_nice:
        os.nice(settings.worker_nice)  # asked for: the e-stop then waits when CPU is short
    runtime = RemoteRuntime(writer, init["chains"], init["joint_names"], first_state)
    try:
        await _serve(runtime, init, reader, writer, logger)
    except BaseExceptionGroup as group:
        error = first_teleop_error(group)
        if error is None:
            raise
        # Tell the control process why (a busy port, a bad URL, no broker) and exit
        # quietly: it reports the error as one line.
        writer.write(pack(("failed", str(error))))
        with contextlib.suppress(ConnectionError):
            await writer.drain()


async def _serve(
    runtime: RemoteRuntime,
    init: Mapping[str, Any],
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    logger: logging.Logger,
) -> None:
    ready: asyncio.Future[TeleopBridge] = asyncio.get_running_loop().create_future()
    async with aio.TaskGroup() as group:
        serving = group.create_task(
            serve_in_process(
                runtime,
                init["settings"],
                init["url"],
                robot_name=init["robot_name"],
                instance=init.get("instance"),
                logger=logger,
                ready=ready,
            )
        )
        bridge = await ready
        runtime.bridge = bridge
        writer.write(pack(("ready", str(bridge.url))))
        reporter = group.create_task(_report(bridge, writer))
        try:
            while True:
                runtime.on_frame(await receive(reader))
        except (asyncio.IncompleteReadError, ConnectionError):
            # ConnectionError: a write to the closed channel failed first (BrokenPipeError).
            logger.info("the control process closed the teleop channel; stopping")
        runtime.channel_closed()
        serving.cancel()
        reporter.cancel()


async def _report(bridge: TeleopBridge, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while True:
            counters = bridge.counters.as_dict()
            writer.write(pack(("counters", counters, bridge.connected.is_set())))
            await writer.drain()
            await asyncio.sleep(REPORT_INTERVAL_S)


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m hilbot.driver.teleop.worker FD``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not args[0].isdigit():
        print("usage: python -m hilbot.driver.teleop.worker FD", file=sys.stderr)
        return 2
    # A Ctrl+C at the terminal reaches this process too (the foreground process group);
    # the control process ends it on shutdown (it exits when the channel closes). Started
    # through child_python, it ignores SIGINT from the bootstrap on, still importing.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run_worker(int(args[0])))
    return 0


if __name__ == "__main__":
    status = main()
    # Exit without the interpreter's finalizers: an MQTT client left in a reference cycle
    # (an exception's frames) would otherwise be collected after asyncio.run closed its
    # loop, and paho's socket-close callback then logs a traceback from the closed loop.
    # Everything the worker owns is closed by now; only the streams need flushing.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
