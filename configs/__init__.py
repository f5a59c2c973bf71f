"""Shipped robot configs (YAML) and their URDFs, and shipped trajectories, as package data.

>>> config_path("openmanipulator_x").name
'openmanipulator_x.yaml'
>>> trajectory_path("wave.yaml").name
'wave.yaml'
"""

from __future__ import annotations

from pathlib import Path

ROBOTS_DIR = Path(__file__).parent / "robots"
TRAJECTORIES_DIR = Path(__file__).parent / "trajectories"
_TRAJECTORY = (".yaml", ".yml", ".csv")  # the suffixes of a trajectory file

__all__ = [
    "ROBOTS_DIR",
    "TRAJECTORIES_DIR",
    "config_path",
    "robot_names",
    "trajectory_names",
    "trajectory_path",
]


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


def trajectory_names() -> tuple[str, ...]:
    """File names of the shipped trajectories, e.g. ``("wave.yaml",)``."""
    return tuple(sorted(p.name for p in TRAJECTORIES_DIR.iterdir() if p.suffix in _TRAJECTORY))


def trajectory_path(name: str) -> Path:
    """Return the path of the shipped trajectory ``name`` (``"wave.yaml"`` or ``"wave"``).

    Raises:
        FileNotFoundError: none has that name; the message lists those that exist.
    """
    for candidate in (name, *(name + suffix for suffix in _TRAJECTORY)):
        path = TRAJECTORIES_DIR / candidate
        if Path(candidate).name == candidate and path.is_file():
            return path
    raise FileNotFoundError(
        f"no trajectory file {name!r} and no shipped trajectory of that name; "
        f"shipped trajectories: {', '.join(trajectory_names())}"
    )
