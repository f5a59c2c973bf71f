"""Scene objects for the MuJoCo body: a table, a box, declared as data.

A scene is a list of primitive objects around the robot, in the robot's root frame
[m]. Fixed objects (``mass: 0``, the default) are part of the world, like a table;
objects with a mass are free bodies the robot can push or grasp::

    objects:
      - {name: table, shape: box, size: [0.3, 0.3, 0.02], pos: [0.25, 0, -0.02]}
      - {name: cube, shape: box, size: [0.015, 0.015, 0.015], pos: [0.2, 0, 0.015],
         mass: 0.05}

``size`` follows MuJoCo: half-extents of a box, ``[radius]`` of a sphere,
``[radius, half-length]`` of a cylinder or capsule.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hilbot.hal.errors import ConfigError

#: Number of ``size`` values each shape takes (MuJoCo's geom ``size``).
SHAPE_SIZES = {"box": 3, "sphere": 1, "cylinder": 2, "capsule": 2}


@dataclass(frozen=True)
class SceneObject:
    """One primitive object of the scene.

    Attributes:
        name: unique name (also the MuJoCo body name).
        shape: ``box``, ``sphere``, ``cylinder`` or ``capsule``.
        size: MuJoCo geom size [m] (half-extents for a box).
        pos: (x, y, z) of its center in the robot's root frame [m].
        mass: [kg]; 0 fixes it to the world.
        friction: sliding friction coefficient.
        rgba: colour, for the view.
    """

    name: str
    shape: str
    size: tuple[float, ...]
    pos: tuple[float, float, float]
    mass: float = 0.0
    friction: float = 1.0
    rgba: tuple[float, float, float, float] = (0.6, 0.45, 0.3, 1.0)

    def __post_init__(self) -> None:
        where = f"scene object {self.name!r}"
        if not self.name or not self.name.replace("_", "").isalnum():
            raise ConfigError(f"{where}: name must be letters, digits and _", field="name")
        expected = SHAPE_SIZES.get(self.shape)
        if expected is None:
            raise ConfigError(
                f"{where}: unknown shape {self.shape!r}; expected {', '.join(SHAPE_SIZES)}",
                field="shape",
            )
        if len(self.size) != expected or not all(_positive(s) for s in self.size):
            raise ConfigError(
                f"{where}: a {self.shape} takes {expected} positive finite sizes [m], "
                f"got {list(self.size)}",
                field="size",
            )
        if len(self.pos) != 3 or not all(math.isfinite(p) and abs(p) < 100 for p in self.pos):
            raise ConfigError(f"{where}: pos must be 3 finite values [m] within 100 m", field="pos")
        if not (math.isfinite(self.mass) and 0 <= self.mass < 1000):
            raise ConfigError(f"{where}: mass must be in [0, 1000) kg", field="mass")
        if not (math.isfinite(self.friction) and 0 <= self.friction <= 10):
            raise ConfigError(f"{where}: friction must be in [0, 10]", field="friction")
        if len(self.rgba) != 4 or not all(0 <= c <= 1 for c in self.rgba):
            raise ConfigError(f"{where}: rgba must be 4 values in [0, 1]", field="rgba")


def _positive(value: float) -> bool:
    return math.isfinite(value) and 0 < value < 100


def scene_from_data(data: Any) -> tuple[SceneObject, ...]:
    """Parse ``{"objects": [...]}`` (or a bare list) into scene objects.

    Raises:
        ConfigError: a malformed entry, naming it and the bad field.
    """
    items = data.get("objects", []) if isinstance(data, Mapping) else data
    if not isinstance(items, Sequence) or isinstance(items, str):
        raise ConfigError("a scene is a list of objects under 'objects'", field="objects")
    out: list[SceneObject] = []
    for k, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise ConfigError(f"scene object {k} is not a mapping", field="objects")
        known = {"name", "shape", "size", "pos", "mass", "friction", "rgba"}
        unknown = sorted(set(item) - known)
        if unknown:
            raise ConfigError(
                f"scene object {k}: unknown field(s) {unknown}; known: {sorted(known)}",
                field=str(unknown[0]),
            )
        try:
            out.append(
                SceneObject(
                    name=str(item.get("name", f"object{k}")),
                    shape=str(item.get("shape", "box")),
                    size=tuple(float(v) for v in item.get("size", ())),
                    pos=tuple(float(v) for v in item.get("pos", ())),  # type: ignore[arg-type]
                    mass=float(item.get("mass", 0.0)),
                    friction=float(item.get("friction", 1.0)),
                    rgba=tuple(float(v) for v in item.get("rgba", (0.6, 0.45, 0.3, 1.0))),  # type: ignore[arg-type]
                )
            )
        except ConfigError:
            raise
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"scene object {k}: {exc}", field="objects") from None
    names = [o.name for o in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"scene object names used twice: {twice}", field="name")
    return tuple(out)


def load_scene(path: Path) -> tuple[SceneObject, ...]:
    """Load a scene YAML file (``objects: [...]``).

    Raises:
        ConfigError: the file is missing, not YAML, or an entry is malformed.
    """
    import yaml

    from hilbot._bounded import load_yaml, yaml_problem

    try:
        data = load_yaml(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read the scene file {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        problem = yaml_problem(exc)
        raise ConfigError(f"the scene file {path} is not valid YAML: {problem}") from None
    return scene_from_data(data or {})
