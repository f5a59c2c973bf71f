"""Which driver answers to a robot's name: instance ids in ``status``, sans I/O.

Each driver (``hilbot run``) picks a random instance id at start and puts it,
with its start time, in every ``status`` and ``state`` payload and in its last
will. At start it reads the retained ``status`` of its name: another instance
online means another driver already answers there, and this one refuses to
start unless told to take over (``--takeover``). While it runs it follows its
own ``status`` topic: a status of its name saying offline (a will) is
overwritten with its own again; one saying another instance is online ends the
lesser of the two (see :meth:`Instance.outranks`).
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any


def new_instance_id() -> str:
    """A fresh random instance id (16 hex digits), never derived from anything published."""
    return secrets.token_hex(8)


@dataclass(frozen=True, slots=True)
class Seen:
    """A ``status`` payload as another driver (or a will) left it."""

    online: bool
    instance: str | None
    started: float
    takeover: bool

    @property
    def rank(self) -> tuple[bool, float, str]:
        """Precedence: a driver that took over, then the later start, then the larger id."""
        return (self.takeover, self.started, self.instance or "")


@dataclass(frozen=True, slots=True)
class Instance:
    """This driver: its id, its start time (Unix [s]) and whether it took over its name."""

    id: str = field(default_factory=new_instance_id)
    started: float = field(default_factory=time.time)
    takeover: bool = False

    @property
    def rank(self) -> tuple[bool, float, str]:
        """Precedence, as :attr:`Seen.rank`."""
        return (self.takeover, self.started, self.id)

    def outranks(self, other: Seen) -> bool:
        """Whether this driver keeps the name when ``other`` is online too.

        A driver started with ``--takeover`` outranks one that was not; among
        equals the later start wins (two drivers that started at the same time
        and both found the name free), then the larger id.
        """
        return self.rank > other.rank

    def fields(self) -> dict[str, Any]:
        """The ``instance``, ``started`` and ``takeover`` fields of a ``status`` payload."""
        return {"instance": self.id, "started": round(self.started, 6), "takeover": self.takeover}


def read_status(payload: bytes) -> Seen | None:
    """Decode a ``status`` payload; None for an empty (cleared) or unreadable one."""
    try:
        data = json.loads(payload)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("online"), bool):
        return None
    instance = data.get("instance")
    started = data.get("started")
    return Seen(
        online=data["online"],
        instance=instance if isinstance(instance, str) else None,
        started=float(started) if isinstance(started, int | float) else 0.0,
        takeover=data.get("takeover") is True,
    )
