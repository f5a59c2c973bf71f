"""The JSON Schema files of the teleop payloads, and the models of what hilbot publishes.

The files in ``schema/`` next to this module ship with the package, for
subscribers and senders in other languages. They are written from the input
models of :mod:`~hilbot.driver.teleop.messages` and the output models below
by ``python -m hilbot.driver.teleop.schema --write`` and checked against them in
the tests (``--check`` does the same from the command line).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode

from hilbot.driver.runtime.safety import Mode
from hilbot.driver.teleop.messages import (
    CommandPayload,
    JointTargetPayload,
    PoseTargetPayload,
    Quaternion,
    RejectReason,
)

# What hilbot publishes (``state``, ``status``, ``error``), as pydantic models.
#
# They describe the payloads :mod:`~hilbot.driver.teleop.messages` and the bridge
# build, for subscribers: the shipped JSON Schema files of these topics are
# generated from them. They are open (unknown fields are allowed), so that a field
# added to the telemetry does not break a subscriber that validates.

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


#: The model behind each schema ``schema/<name>.schema.json``.
MODELS: dict[str, type[BaseModel]] = {
    "pose_target": PoseTargetPayload,
    "joint_target": JointTargetPayload,
    "command": CommandPayload,
    "state": StatePayload,
    "status": StatusPayload,
    "error": ErrorPayload,
}
#: Schema names.
SCHEMAS = tuple(MODELS)
#: Which schema each topic (after the prefix) follows; ``target/`` covers every chain.
TOPIC_SCHEMAS = {
    "target/": "pose_target",
    "joints/target": "joint_target",
    "cmd": "command",
    "state": "state",
    "status": "status",
    "error": "error",
}
DIALECT = "https://json-schema.org/draft/2020-12/schema"


class _Generator(GenerateJsonSchema):
    """Pydantic's generator with the dialect named and without a title on every field."""

    def generate(self, schema: Any, mode: JsonSchemaMode = "validation") -> Any:
        return {"$schema": DIALECT, **super().generate(schema, mode)}

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def generate_schema(name: str) -> dict[str, Any]:
    """Return the JSON Schema (draft 2020-12) of ``name``, generated from its model.

    Raises:
        KeyError: ``name`` is not one of :data:`SCHEMAS`.
    """
    return MODELS[_known(name)].model_json_schema(schema_generator=_Generator)


def schema_text(name: str) -> str:
    """The text of ``name``'s schema file, as ``--write`` writes it."""
    return json.dumps(generate_schema(name), indent=2, ensure_ascii=False) + "\n"


def load_schema(name: str) -> dict[str, Any]:
    """Return the shipped JSON Schema (draft 2020-12) called ``name``.

    Raises:
        KeyError: ``name`` is not one of :data:`SCHEMAS`.
    """
    text = _shipped(_known(name)).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def stale_schemas() -> list[str]:
    """Names of the shipped schema files that differ from their models."""
    return [n for n in SCHEMAS if _shipped(n).read_text(encoding="utf-8") != schema_text(n)]


def _known(name: str) -> str:
    if name not in MODELS:
        raise KeyError(f"unknown schema {name!r}; known: {', '.join(SCHEMAS)}")
    return name


def _shipped(name: str) -> Any:
    return resources.files("hilbot.driver.teleop").joinpath(f"schema/{name}.schema.json")


def main(argv: Sequence[str] | None = None) -> int:
    """Write (``--write``) or check (``--check``) the shipped schema files; exit 1 if stale."""
    parser = argparse.ArgumentParser(prog="python -m hilbot.driver.teleop.schema")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help="write schema/*.schema.json")
    action.add_argument("--check", action="store_true", help="exit 1 if a file is stale")
    args = parser.parse_args(argv)
    if args.write:
        folder = Path(__file__).with_name("schema")
        for name in SCHEMAS:
            (folder / f"{name}.schema.json").write_text(schema_text(name), encoding="utf-8")
        print(f"wrote {len(SCHEMAS)} schemas to {folder}")
        return 0
    stale = stale_schemas()
    for name in stale:
        print(f"stale: schema/{name}.schema.json (run with --write)", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
