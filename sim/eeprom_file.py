"""A virtual bus's EEPROM kept in a file, so that it survives a restart as a servo's does.

Real servos keep their EEPROM (ID, baud rate, offsets, limits, operating mode, ...)
across power cycles; a virtual bus given a file does too. The file holds one entry per
servo slot (the servo's place on the bus, in the order the bus lists them: ids can
change, slots do not), with the slot's model and its EEPROM bytes::

    {"format": 1, "servos": [{"model": "STS3215", "eeprom": "<hex>"}, ...]}

A slot whose model differs from the file's (the robot was rebuilt) powers up
factory-fresh. Writes are atomic (a temporary file, then a rename), so a bus killed
mid-write leaves the previous file. Where the files live: :func:`state_dir`.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

FORMAT = 1
#: Overrides where the virtual buses keep their EEPROM files (tests point it at a tmp dir).
STATE_DIR_ENV = "HILBOT_STATE_DIR"


def state_dir() -> Path:
    """The folder of the virtual buses' EEPROM files.

    ``$HILBOT_STATE_DIR``, else ``$XDG_STATE_HOME/hilbot/sim-bus``, else
    ``~/.local/state/hilbot/sim-bus`` (the XDG base directory specification's state folder).
    """
    override = os.environ.get(STATE_DIR_ENV)
    if override:
        return Path(override)
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "state"
    return base / "hilbot" / "sim-bus"


class EepromServo(Protocol):
    """What keeping EEPROM needs of a simulated servo."""

    def eeprom_image(self) -> bytes:
        """The EEPROM as it would survive power-off."""
        ...

    def restore_eeprom(self, image: bytes) -> None:
        """Power up with ``image`` as the EEPROM."""
        ...


class EepromFile:
    """The EEPROM of a bus's servos, loaded from and saved to ``path``.

    Args:
        path: the file (created with its folder on the first save).
        servos: the bus's servos, in slot order.
        models: their model names, in the same order.
    """

    def __init__(self, path: Path, servos: Sequence[EepromServo], models: Sequence[str]) -> None:
        self.path = Path(path)
        self.servos = list(servos)
        self.models = list(models)
        self._saved: list[bytes] = []

    def load(self) -> list[str]:
        """Restore the servos from the file; return a line per slot left factory-fresh.

        A missing file restores nothing (every servo is factory-fresh). An unreadable one
        is a one-line ``ValueError`` naming it.
        """
        notes: list[str] = []
        entries = self._entries()
        for k, (servo, model) in enumerate(zip(self.servos, self.models, strict=True)):
            entry = entries[k] if k < len(entries) else None
            if entry is None:
                continue
            if entry.get("model") != model:
                notes.append(
                    f"slot {k + 1}: the saved EEPROM is a {entry.get('model')}'s, this servo "
                    f"is a {model}: it starts factory-fresh"
                )
                continue
            try:
                image = bytes.fromhex(str(entry.get("eeprom", "")))
            except ValueError:
                raise ValueError(f"{self.path}: slot {k + 1}'s EEPROM is not hex") from None
            servo.restore_eeprom(image)
        self._saved = [s.eeprom_image() for s in self.servos]
        return notes

    def _entries(self) -> list[dict[str, object]]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise ValueError(f"{self.path}: cannot read it ({exc.strerror})") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{self.path}: not an EEPROM file ({exc.msg})") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"{self.path}: not an EEPROM file of format {FORMAT}")
        servos = data.get("servos")
        if not isinstance(servos, list):
            raise ValueError(f"{self.path}: not an EEPROM file of format {FORMAT}")
        return [s if isinstance(s, dict) else {} for s in servos]

    def changed(self) -> bool:
        """Whether any servo's EEPROM differs from what was last loaded or saved."""
        return any(
            s.eeprom_image() != saved for s, saved in zip(self.servos, self._saved, strict=False)
        ) or len(self._saved) != len(self.servos)

    def save(self) -> None:
        """Write every servo's EEPROM to the file (atomically)."""
        images = [s.eeprom_image() for s in self.servos]
        data = {
            "format": FORMAT,
            "servos": [
                {"model": m, "eeprom": image.hex()}
                for m, image in zip(self.models, images, strict=True)
            ],
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".eeprom-", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(data, out)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self._saved = images

    def save_if_changed(self) -> bool:
        """``save`` when something changed; whether it saved."""
        if not self.changed():
            return False
        self.save()
        return True
