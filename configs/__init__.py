"""Shipped robot configs (YAML) and their URDFs, as package data.

>>> config_path("openmanipulator_x").name
'openmanipulator_x.yaml'
"""

from __future__ import annotations

from pathlib import Path

ROBOTS_DIR = Path(__file__).parent / "robots"

__all__ = ["ROBOTS_DIR", "config_path", "robot_names"]


def robot_names() -> tuple[str, ...]:
    """Names of the shipped robot configs, e.g. ``("koch_v1_1_follower", ...)``.

    Other YAML files beside them (collision models, ...) have no ``servos:`` section.
    """
    return tuple(
        sorted(
            p.stem
            for p in ROBOTS_DIR.glob("*.yaml")
            if any(line.startswith("servos:") for line in p.read_text().splitlines())
        )
    )


def config_path(name: str) -> Path:
    """Return the path of the shipped config called ``name``.

    Raises:
        FileNotFoundError: no shipped config has that name; the message lists those that exist.
    """
    path = ROBOTS_DIR / f"{name}.yaml"
    if not path.is_file():
        raise FileNotFoundError(
            f"no config file {name!r} and no shipped robot of that name; "
            f"shipped robots: {', '.join(robot_names())}"
        )
    return path
