"""The JSON Schema files of the teleop payloads, shipped with the package."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

#: Schema names: ``schema/<name>.schema.json`` next to this module.
SCHEMAS = ("pose_target", "joint_target", "command", "state", "status", "error")
#: Which schema each topic (after the prefix) follows; ``target/`` covers every chain.
TOPIC_SCHEMAS = {
    "target/": "pose_target",
    "joints/target": "joint_target",
    "cmd": "command",
    "state": "state",
    "status": "status",
    "error": "error",
}


def load_schema(name: str) -> dict[str, Any]:
    """Return the JSON Schema (draft 2020-12) called ``name``.

    Raises:
        KeyError: ``name`` is not one of :data:`SCHEMAS`.
    """
    if name not in SCHEMAS:
        raise KeyError(f"unknown schema {name!r}; known: {', '.join(SCHEMAS)}")
    text = resources.files("hilbot.driver.teleop").joinpath(f"schema/{name}.schema.json")
    schema: dict[str, Any] = json.loads(text.read_text(encoding="utf-8"))
    return schema
