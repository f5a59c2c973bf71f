"""Stream a recording to disk while it is recorded, so that a crash does not lose it.

While ``hilbot run --record run.npz`` (or ``hilbot bench``) records, a writer thread
appends the new cycles about once a second to the folder ``run.npz.partial``::

    run.npz.partial/header.json          the header (rewritten when commands or faults are logged)
    run.npz.partial/chunk-000000.npz     the first cycle: every channel's rows, ``row0`` (the
    run.npz.partial/chunk-000001.npz     first row's index) and the chunk's clamp events
    ...

Every file there is written under a temporary name and renamed, so each file present is
complete. The control loop only hands the writer references to rows it has finished (a
queue put); the copying and the writing happen in the thread.

A clean end writes ``run.npz`` (through a temporary file and a rename, so an earlier
``run.npz`` is replaced only by a complete one) and removes the folder. After ``kill -9``
the folder stays: :meth:`Recording.load <hilbot.driver.bench.recording.Recording.load>`
of ``run.npz`` (when there is no such file) or of the folder reads it, with ``cut_short``
set. ``ee_measured`` is not computed in a partial recording (it is NaN).
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hilbot.driver.bench.recording import CHUNK_GLOB as CHUNK_GLOB  # re-exported
from hilbot.driver.bench.recording import HEADER_FILE as HEADER_FILE  # re-exported
from hilbot.driver.bench.recording import PARTIAL_SUFFIX as PARTIAL_SUFFIX  # re-exported
from hilbot.driver.bench.recording import RecordingHeader
from hilbot.driver.bench.recording import load_partial as load_partial  # re-exported
from hilbot.driver.bench.recording import partial_path as partial_path  # re-exported
from hilbot.driver.bench.recording import partial_source as partial_source  # re-exported
from hilbot.driver.files import write_atomic, write_text_atomic

CHUNK_PERIOD = 1.0  # [s] of cycles per chunk

log = logging.getLogger(__name__)


def leftover_problem(path: Path, option: str) -> str | None:
    """A one-line refusal when an earlier run's cut-short recording sits at ``path.partial``."""
    folder = partial_path(path)
    if not folder.exists():
        return None
    return (
        f"{option} {path}: {folder} holds the recording of an earlier run that was cut short; "
        f"replay it (hilbot replay {folder}), then move or remove it, or record to another file"
    )


def remove_partial(path: Path) -> None:
    """Remove ``path``'s partial folder (``path`` has been written in full)."""
    shutil.rmtree(partial_path(path), ignore_errors=True)


@dataclass(frozen=True)
class Chunk:
    """Rows ``start:end`` of a recorder's arrays (references: the writer copies them)."""

    arrays: dict[str, NDArray[Any]]
    start: int
    end: int
    events: list[tuple[int, int, int, float, float]]
    events_start: int
    events_end: int
    header: RecordingHeader | None  # a copy to write first (it changed), or None


class RecordingStream:
    """A writer thread that streams a recording's cycles into ``partial_path(path)``.

    Args:
        path: the recording's final file; the stream writes next to it.
        period: seconds of cycles per chunk.

    Attributes:
        folder: where the chunks go.
        error: the write error that stopped the stream, if any (it said so once, in the log).
        chunks: chunk files written so far.
    """

    def __init__(self, path: Path, period: float = CHUNK_PERIOD) -> None:
        self.path = Path(path)
        self.folder = partial_path(self.path)
        self.period = period
        self.error: OSError | None = None
        self.chunks = 0
        self._jobs: queue.SimpleQueue[Chunk | None] = queue.SimpleQueue()
        # Started here, not at the first chunk: a thread start waits for the thread to run,
        # which must not happen inside a cycle.
        self._thread = threading.Thread(target=self._run, name="hilbot-recording", daemon=True)
        self._thread.start()

    def submit(self, chunk: Chunk) -> None:
        """Queue a chunk (never blocks; dropped once a write has failed)."""
        if self.error is None:
            self._jobs.put(chunk)

    def close(self, timeout: float | None = None) -> None:
        """Write what is queued, then stop the thread (call off the control loop)."""
        if self._thread.is_alive():
            self._jobs.put(None)
            self._thread.join(timeout)

    def discard(self) -> None:
        """Remove the folder (the complete recording has been written)."""
        remove_partial(self.path)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            if self.error is not None:
                continue
            try:
                self._write(job)
            except OSError as exc:
                self.error = exc
                log.error(
                    "recording: cannot write %s: %s; the run goes on, recording in memory "
                    "until it ends",
                    self.folder,
                    exc.strerror or exc,
                )

    def _write(self, job: Chunk) -> None:
        if not self.folder.is_dir():
            self.folder.mkdir(parents=True)  # bench: --out is made when the run ends
        if job.header is not None:
            write_text_atomic(self.folder / HEADER_FILE, job.header.to_json())
        if job.end <= job.start and job.events_end <= job.events_start:
            return
        rows = {
            name: np.ascontiguousarray(a[job.start : job.end]) for name, a in job.arrays.items()
        }
        events = job.events[job.events_start : job.events_end]
        rows["clamp_events"] = np.array(events, dtype=np.float64).reshape(-1, 5)
        rows["row0"] = np.array(job.start, dtype=np.int64)
        name = f"chunk-{self.chunks:06d}.npz"
        # Compressed (zlib runs without the GIL), as the final file is: a long run must not
        # fill the disk. No fsync: a killed process's writes are in the page cache already;
        # the final file is synced. Typed Any: numpy's stub types **kwds as allow_pickle.
        arrays: dict[str, Any] = rows
        write_atomic(self.folder / name, lambda fh: np.savez_compressed(fh, **arrays), sync=False)
        self.chunks += 1


def header_copy(header: RecordingHeader) -> RecordingHeader:
    """A copy of ``header`` whose logs the recorder may go on appending to."""
    return dataclasses.replace(header, commands=list(header.commands), faults=list(header.faults))
