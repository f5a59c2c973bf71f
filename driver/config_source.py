"""Where a robot config's fields come from: its YAML, the robot it ``extends``, the URDF file.

A config may name a robot it is based on, a shipped name or another YAML (relative to
this one), and give only what differs::

    extends: so101_leader
    buses:
      - {name: main, port: /dev/ttyUSB0}
    servos:
      - {joint: gripper, id: 7}

The two are merged field by field: mappings key by key, the named lists item by item
(``buses`` and ``chains`` by ``name``, ``servos`` by ``joint``; an item naming no such
entry is added), anything else replaced. The result is validated as any config is, so an
error names the field of the file given.

The URDF is found wherever the YAML was copied to: a relative ``urdf`` is looked for
beside the YAML first, then among the shipped robots by its file name; a config that
``extends`` another and names no URDF uses that robot's. Paths come out absolute, so a
child process (a virtual bus) started in another folder finds the same file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from hilbot._bounded import load_yaml, yaml_problem
from hilbot.driver.errors import ConfigError

#: The key naming the robot a config is based on.
EXTENDS = "extends"
#: How deep ``extends`` may chain (a loop is refused before this).
MAX_DEPTH = 8
#: The lists merged item by item, and the field that names an item.
_KEYED_LISTS = {"buses": "name", "chains": "name", "servos": "joint"}


def expand(data: Mapping[str, Any], file: Path) -> dict[str, Any]:
    """``data`` (the YAML of ``file``) merged onto what it ``extends``, its URDF absolute.

    Raises:
        ConfigError: a base that cannot be found or read, or a loop of ``extends``.
    """
    return _expand(dict(data), file.absolute(), ())


def _expand(data: dict[str, Any], file: Path, seen: tuple[Path, ...]) -> dict[str, Any]:
    data = dict(data)
    if "urdf" in data and isinstance(data["urdf"], str | Path):
        data["urdf"] = str(find_urdf(Path(data["urdf"]), file.parent))
    base_name = data.pop(EXTENDS, None)
    if base_name is None:
        return data
    if not isinstance(base_name, str) or not base_name:
        raise ConfigError(file, (EXTENDS,), "expected the name or YAML file of a robot config")
    base_file = _base_file(base_name, file)
    chain = (*seen, file)
    if base_file.resolve() in {p.resolve() for p in chain} or len(chain) >= MAX_DEPTH:
        raise ConfigError(file, (EXTENDS,), f"{base_name!r} leads back to itself")
    base = _expand(_read(base_file), base_file, chain)
    return merge(base, data)


def find_urdf(urdf: Path, folder: Path) -> Path:
    """``urdf`` beside the YAML in ``folder``, else the shipped one of that file name.

    An absolute path, or one found nowhere, is returned as given (relative ones made
    absolute from ``folder``): the URDF check then names it.
    """
    if urdf.is_absolute():
        return urdf
    beside = folder / urdf
    if beside.is_file():
        return beside
    from hilbot.configs import ROBOTS_DIR

    shipped = ROBOTS_DIR / urdf.name
    return shipped if shipped.is_file() else beside


def _base_file(name: str, file: Path) -> Path:
    """The YAML ``extends: name`` means: a file (relative to ``file``), or a shipped robot."""
    from hilbot.configs import config_path

    candidate = Path(name)
    if not candidate.is_absolute():
        candidate = file.parent / candidate
    if candidate.suffix in (".yaml", ".yml") or candidate.is_file():
        if not candidate.is_file():
            raise ConfigError(file, (EXTENDS,), f"no config file {candidate}")
        return candidate
    try:
        found: Path = config_path(name)
    except FileNotFoundError as exc:
        raise ConfigError(file, (EXTENDS,), str(exc)) from None
    return found


def _read(file: Path) -> dict[str, Any]:
    try:
        data = load_yaml(file.read_text())
    except OSError as exc:
        raise ConfigError(file, (), f"cannot read the config: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(file, (), f"not valid YAML: {yaml_problem(exc)}") from None
    if not isinstance(data, dict):
        raise ConfigError(file, (), "expected a mapping of config fields at the top level")
    return data


def merge(base: Mapping[str, Any], over: Mapping[str, Any], key: str = "") -> dict[str, Any]:
    """``over`` merged onto ``base``: mappings key by key, named lists item by item."""
    out = dict(base)
    for name, value in over.items():
        old = out.get(name)
        if isinstance(old, Mapping) and isinstance(value, Mapping):
            out[name] = merge(old, value, name)
        elif not key and name in _KEYED_LISTS and isinstance(old, list) and isinstance(value, list):
            out[name] = _merge_items(old, value, _KEYED_LISTS[name], name)
        else:
            out[name] = value
    return out


def _merge_items(base: list[Any], over: list[Any], key: str, field: str) -> list[Any]:
    """Items of ``over`` merged onto the item of ``base`` with the same ``key``, or added.

    A single bus naming no ``name`` is the single bus of the base (both are ``main``).
    """
    out = list(base)
    for item in over:
        if not isinstance(item, Mapping):
            out.append(item)  # validation names it
            continue
        name = item.get(key)
        if name is None and field == "buses" and len(base) == 1 and len(over) == 1:
            name = base[0].get(key, "main") if isinstance(base[0], Mapping) else None
        default = "main" if field == "buses" else None
        match = [
            i
            for i, old in enumerate(out)
            if isinstance(old, Mapping) and name is not None and old.get(key, default) == name
        ]
        if match:
            out[match[0]] = merge(out[match[0]], item, field)
        else:
            out.append(dict(item))
    return out
