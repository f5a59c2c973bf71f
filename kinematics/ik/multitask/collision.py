"""Load collision capsules and pairs from a robot's YAML data file into a ``SelfCollision``."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from hilbot.kinematics.ik.multitask.tasks import SelfCollision
from hilbot.kinematics.ik.qp.limits.geometry import Capsule


class CollisionDataError(ValueError):
    """A collision data file is malformed.

    Attributes:
        source: the file (or ``"<mapping>"``).
        field: the dotted path of the bad field.
        reason: what is wrong.
    """

    def __init__(self, source: str, field: str, reason: str) -> None:
        self.source = source
        self.field = field
        self.reason = reason
        super().__init__(f"{source}: {field}: {reason}")


def load_self_collision(
    path_or_data: str | Path | Mapping[str, Any],
    *,
    weight: float = 0.1,
    margin: float | None = None,
) -> SelfCollision:
    """Read capsules and pairs (see ``configs/robots/bimanual_collision.yaml``).

    Args:
        path_or_data: a file path, the name of a file shipped in
            ``hilbot.configs/robots`` (e.g. ``"bimanual_collision.yaml"``), or the
            already-parsed mapping.
        weight: soft push weight of the returned ``SelfCollision``.
        margin: override of the file's ``margin`` [m].

    Returns:
        The ``SelfCollision`` task (usable as a ``MultiTaskSolver(self_collision=...)``,
        or its ``pairs`` in a ``CollisionAvoidance`` limit).

    Raises:
        CollisionDataError: a missing or malformed field, naming it.
        FileNotFoundError: no such file.
    """
    source, data = _read(path_or_data)
    if not isinstance(data, Mapping):
        raise CollisionDataError(source, "<root>", "expected a mapping")
    capsules_data = data.get("capsules")
    if not isinstance(capsules_data, Mapping) or not capsules_data:
        raise CollisionDataError(source, "capsules", "expected a non-empty mapping name -> capsule")
    capsules = {
        str(name): _capsule(source, f"capsules.{name}", spec)
        for name, spec in capsules_data.items()
    }
    pairs_data = data.get("pairs")
    if not isinstance(pairs_data, list) or not pairs_data:
        raise CollisionDataError(source, "pairs", "expected a non-empty list of [name, name]")
    pairs = []
    for i, pair in enumerate(pairs_data):
        if not (isinstance(pair, list) and len(pair) == 2):
            raise CollisionDataError(source, f"pairs[{i}]", f"expected [name, name], got {pair!r}")
        for name in pair:
            if name not in capsules:
                raise CollisionDataError(
                    source, f"pairs[{i}]", f"unknown capsule {name!r}; known: {sorted(capsules)}"
                )
        pairs.append((capsules[pair[0]], capsules[pair[1]]))
    try:
        return SelfCollision(
            tuple(pairs),
            margin=float(data.get("margin", 0.02) if margin is None else margin),
            weight=weight,
            detection_distance=float(data.get("detection_distance", 0.1)),
        )
    except (TypeError, ValueError) as error:
        raise CollisionDataError(source, "margin/detection_distance", str(error)) from error


def _read(path_or_data: str | Path | Mapping[str, Any]) -> tuple[str, Any]:
    if isinstance(path_or_data, Mapping):
        return "<mapping>", path_or_data
    import yaml  # a declared dependency of hilbot; imported lazily to keep kinematics light

    path = Path(path_or_data)
    if not path.exists() and len(path.parts) == 1:
        shipped = resources.files("hilbot.configs").joinpath("robots").joinpath(path.name)
        return path.name, yaml.safe_load(shipped.read_text())
    return str(path), yaml.safe_load(path.read_text())


def _capsule(source: str, field: str, spec: Any) -> Capsule:
    if not isinstance(spec, Mapping):
        raise CollisionDataError(source, field, "expected {link, radius, a, b}")
    missing = [key for key in ("link", "radius") if key not in spec]
    if missing:
        raise CollisionDataError(source, field, f"missing {missing}")
    try:
        a = spec.get("a", [0.0, 0.0, 0.0])
        return Capsule(str(spec["link"]), float(spec["radius"]), a, spec.get("b", a))
    except (TypeError, ValueError) as error:
        raise CollisionDataError(source, field, str(error)) from error


__all__ = ["CollisionDataError", "load_self_collision"]
