"""Where calibrations live: ``$XDG_CONFIG_HOME/hilbot/calibration/<robot>-<port key>.yaml``.

The port key is the adapter's serial number where the system names one
(``/dev/serial/by-id/usb-..._<serial>-if00``, so a re-plugged adapter that gets another
``ttyACM`` keeps its calibration), else the port's file name; virtual buses use
``virtual``, since their ptys change every run.

A virtual arm's file also records the assembly errors its virtual servos were built with
(``virtual_mounts``, the ``--mount`` of ``hilbot calibrate --demo``): that is the virtual
arm's assembly, which ``hilbot run`` and ``hilbot lead`` rebuild it with.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import yaml

from hilbot._bounded import load_yaml, yaml_problem
from hilbot.driver.runtime.errors import DriverError
from hilbot.hal.calibration import Calibration, CalibrationDataError

BY_ID = Path("/dev/serial/by-id")
#: The key of a virtual arm's assembly errors in its calibration file.
MOUNTS_KEY = "virtual_mounts"


class CalibrationFileError(DriverError):
    """A calibration file cannot be read or is malformed: names the file and the problem."""


def config_home() -> Path:
    """``$XDG_CONFIG_HOME/hilbot`` (default ``~/.config/hilbot``)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "hilbot"


def port_key(port: str, *, virtual: bool = False, by_id: Path = BY_ID) -> str:
    """A file-name-safe key for the bus: ``virtual``, the adapter's serial id, or the port."""
    if virtual:
        return "virtual"
    key = Path(port).name
    try:
        target = Path(port).resolve()
        for link in sorted(by_id.iterdir()) if by_id.is_dir() else ():
            if link.resolve() == target:
                key = link.name
                break
    except OSError:
        pass
    return re.sub(r"[^A-Za-z0-9_.\-]+", "_", key)


def default_path(robot: str, port: str, *, virtual: bool = False) -> Path:
    """The calibration file of ``robot`` on ``port`` under the user's config folder."""
    return config_home() / "calibration" / f"{robot}-{port_key(port, virtual=virtual)}.yaml"


class Saved(NamedTuple):
    """A calibration file's content: the calibration, and a virtual arm's assembly."""

    calibration: Calibration
    #: The ``--mount ID:DEG[:reversed]`` the virtual arm was assembled with; () for others.
    mounts: tuple[str, ...] = ()


def save(calibration: Calibration, path: Path, *, mounts: Sequence[str] = ()) -> Path:
    """Write ``calibration`` as YAML (folders created); returns ``path``.

    ``mounts`` are the assembly errors of the virtual arm it was measured on, if it was.
    """
    data = calibration.to_data()
    if mounts:
        data[MOUNTS_KEY] = list(mounts)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            f"# hilbot calibration of {calibration.robot} on {calibration.port} "
            "(hilbot calibrate writes this file)\n" + yaml.safe_dump(data, sort_keys=False)
        )
    except OSError as exc:
        raise CalibrationFileError(f"cannot write {path}: {exc.strerror}") from exc
    return path


def load(path: Path) -> Calibration:
    """Read a calibration file.

    Raises:
        CalibrationFileError: unreadable, not YAML, or a bad field (named).
    """
    return read(path).calibration


def read(path: Path) -> Saved:
    """Read a calibration file with the virtual arm's assembly it records, if any.

    Raises:
        CalibrationFileError: unreadable, not YAML, or a bad field (named).
    """
    try:
        data = load_yaml(path.read_text())
    except OSError as exc:
        raise CalibrationFileError(f"cannot read the calibration {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        problem = yaml_problem(exc)
        raise CalibrationFileError(f"the calibration {path} is not valid YAML: {problem}") from None
    try:
        calibration = Calibration.from_data(data)
    except CalibrationDataError as exc:
        raise CalibrationFileError(f"the calibration {path}: {exc}") from exc
    return Saved(calibration, _mounts(data.get(MOUNTS_KEY), path))


def _mounts(value: object, path: Path) -> tuple[str, ...]:
    from hilbot.sim.mounting import parse_mounting

    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(m, str) for m in value):
        raise CalibrationFileError(
            f"the calibration {path}: {MOUNTS_KEY}: expected a list of ID:DEG[:reversed]"
        )
    for mount in value:
        try:
            parse_mounting(mount)
        except ValueError as exc:
            raise CalibrationFileError(f"the calibration {path}: {MOUNTS_KEY}: {exc}") from exc
    return tuple(value)
