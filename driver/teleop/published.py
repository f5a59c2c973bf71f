"""What hilbot publishes (``state``, ``status``, ``error``), as pydantic models.

They describe the payloads :mod:`~hilbot.driver.teleop.telemetry` and the bridge
build, for subscribers: the shipped JSON Schema files of these topics are
generated from them. They are open (unknown fields are allowed), so that a field
added to the telemetry does not break a subscriber that validates.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hilbot.driver.safety import Mode
from hilbot.driver.teleop.payloads import Quaternion
from hilbot.driver.teleop.rejection import RejectReason

Reading = list[float | None]  # one value per joint; null where the servo gave none


class Joints(BaseModel):
    """Joint readings, in the order of names [rad, rad/s, A or %, °C]."""

    names: list[str]
    position: Reading
    velocity: Reading
    effort: Reading
    effort_unit: list[Literal["A", "%"]]
    temperature: Reading
    hardware_errors: list[str]


class ChainPose(BaseModel):
    """End-effector pose of a chain in its source frame."""

    position: Annotated[list[Any], Field(min_length=3, max_length=3)]
    orientation: Quaternion


class Fault(BaseModel):
    """A fault the runtime recorded."""

    time: Any
    kind: Any
    joint: Any
    detail: Any


class Stats(BaseModel):
    """Loop timing."""

    target_rate: Any
    rate: Any
    cycles: Any
    overruns: Any


class TeleopCounts(BaseModel):
    """Teleop message counters."""

    received: Any
    accepted: Any
    conflated: Any
    rejected: Any
    rejected_total: Any


class StatePayload(BaseModel):
    """Telemetry on <prefix>/state at state_rate_hz."""

    model_config = ConfigDict(title="state")

    stamp: float
    mode: Mode
    joints: Joints | None
    command: dict[str, float | None]
    chains: dict[str, ChainPose]
    faults: list[Fault]
    watchdog_tripped: bool
    homing: bool
    clamp_counts: dict[str, Any]
    stats: Stats
    glitches: Annotated[
        dict[str, int],
        Field(
            default_factory=dict,
            description="Per joint, the readings refused as glitches since start (moved "
            "faster than the joint can); joints with none are left out.",
        ),
    ]
    last_stop: Annotated[
        dict[str, Any] | None,
        Field(
            default=None,
            description="The last controlled stop that came to rest: reason, duration [s], "
            "the joint that travelled furthest, its distance and the bound the limits allow.",
        ),
    ]
    teleop: TeleopCounts
    instance: Annotated[
        str, Field(description="The driver's instance id, as in status (random per run).")
    ]
    lease: Annotated[
        str | None,
        Field(
            description="The sender holding the robot's lease (others' targets and commands "
            "but estop are refused), or null."
        ),
    ]


class RetainedEstopPayload(BaseModel):
    """A retained estop on the cmd topic, found at start-up, and how to clear it."""

    topic: str
    clear: Annotated[str, Field(description="The one command that clears it.")]
    detail: str


class StatusPayload(BaseModel):
    """Retained on <prefix>/status; the last will sets online to false."""

    model_config = ConfigDict(title="status")

    online: bool
    mode: Mode | None
    armed: bool
    estopped: bool
    faults: list[Any]
    stamp: float
    retained_estop: Annotated[
        RetainedEstopPayload | None,
        Field(description="Set while a retained estop e-stops the robot at every start."),
    ] = None
    instance: Annotated[
        str,
        Field(
            description="The driver's instance id (random per run; the will carries it too). "
            "A driver refuses to start while another instance of its name is online."
        ),
    ]
    started: Annotated[float, Field(description="When that driver started [s since the epoch].")]
    takeover: Annotated[bool, Field(description="That driver was started with --takeover.")] = False


class ErrorPayload(BaseModel):
    """A rejected message, published on <prefix>/error."""

    model_config = ConfigDict(title="error")

    reason: RejectReason
    detail: str
    topic: str
    seq: Annotated[
        int | None, Field(description="The rejected message's seq, when it had a valid one.")
    ]
    stamp: float
    rejected_total: Annotated[int, Field(ge=1)]
