"""The JSON Schema files of the teleop payloads, generated from the pydantic models.

The files in ``schema/`` next to this module ship with the package, for
subscribers and senders in other languages. They are written from
:mod:`~hilbot.driver.teleop.payloads` and :mod:`~hilbot.driver.teleop.published`
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
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode

from hilbot.driver.teleop.payloads import CommandPayload, JointTargetPayload, PoseTargetPayload
from hilbot.driver.teleop.published import ErrorPayload, StatePayload, StatusPayload

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
