"""Errors of the bench: bad scenarios, unreadable recordings, unsupported set-ups.

::

    DriverError
    └── BenchError
        ├── ScenarioError (ValueError)   a scenario that does not validate (with field paths)
        ├── RecordingError               a recording file that cannot be read or written
        ├── RunFailed                    the runtime stopped mid-scenario (keeps what was recorded)
        └── UnsupportedStep              a step the chosen backend or config cannot perform
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hilbot._bounded import clip
from hilbot.driver.runtime.errors import DriverError


class BenchError(DriverError):
    """Root of the bench errors."""


#: How many problems a :class:`ScenarioError` message lists (``problems`` holds them all).
SHOWN_PROBLEMS = 10


class ScenarioError(BenchError, ValueError):
    """A scenario that does not validate.

    Attributes:
        path: the scenario file, or ``None`` for an in-memory scenario.
        problems: ``(field path, message)`` pairs, e.g. ``("steps.2.radius", "...")``.
    """

    def __init__(self, path: Path | None, problems: Sequence[tuple[str, str]]) -> None:
        self.path = path
        self.problems = tuple(problems)
        where = f"{path}: " if path is not None else ""
        shown = self.problems[:SHOWN_PROBLEMS]  # a 200k-step file: not a 16 MB line
        lines = "; ".join(f"{loc}: {clip(msg)}" if loc else clip(msg) for loc, msg in shown)
        more = len(self.problems) - len(shown)
        lines += f"; and {more} more problem(s)" if more else ""
        super().__init__(f"{where}invalid scenario: {lines}")


class RecordingError(BenchError):
    """A recording file that cannot be read or written.

    Attributes:
        path: the file.
        reason: what was wrong with it.
    """

    def __init__(self, path: Path | str, reason: str) -> None:
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class UnsupportedStep(BenchError):
    """A scenario step that the chosen backend cannot perform.

    Attributes:
        step: index of the step in the scenario.
        kind: the step's kind, e.g. ``"fault"``.
        backend: the backend name, e.g. ``"hardware"``.
        reason: why, and what to use instead.
    """

    def __init__(self, step: int, kind: str, backend: str, reason: str) -> None:
        self.step = step
        self.kind = kind
        self.backend = backend
        self.reason = reason
        super().__init__(f"step {step} ({kind}) cannot run on the {backend} backend: {reason}")


class RunFailed(BenchError):
    """The runtime stopped in the middle of a scenario.

    Attributes:
        step: index of the step that was running.
        cause: the error that stopped it.
        recording: the cycles recorded up to then (a ``Recording``), for the report.
    """

    def __init__(self, step: int, cause: BaseException, recording: Any) -> None:
        self.step = step
        self.cause = cause
        self.recording = recording
        super().__init__(f"the runtime stopped during step {step}: {cause!r}")
