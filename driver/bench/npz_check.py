"""Check what an ``.npz`` file declares before numpy loads it.

``numpy.load`` allocates each array at the size its ``.npy`` header declares, before
reading a byte of its data: a few-MB file that declares a 4.8 GB array ends in a
``MemoryError`` (or a machine swapping). :func:`check_npz` reads only the zip directory
and each member's ``.npy`` header (``numpy.lib.format``), and refuses an array larger
than the data its member holds, or members that together need more memory than the
machine has free.
"""

from __future__ import annotations

import math
import os
import zipfile
from pathlib import Path
from typing import IO

import numpy as np
from numpy.lib import format as npy_format

from hilbot._bounded import clip


class NpzTooLarge(ValueError):
    """An ``.npz`` whose arrays cannot be loaded: oversized, damaged or crafted."""


def free_memory() -> int | None:
    """Bytes of memory free on this machine, where the OS says (Linux), else ``None``."""
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def size_text(n: int) -> str:
    """``n`` bytes for a person: ``4.8 GB``, ``512 kB``."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def check_npz(source: Path | IO[bytes], *, memory: int | None = None) -> None:
    """Raise unless every array of the ``.npz`` ``source`` can be loaded as declared.

    ``memory`` is the bytes the arrays may take together (default: the machine's free
    memory, where known).

    Raises:
        NpzTooLarge: an array declares more bytes than its member holds, a header
            numpy cannot read, or more than ``memory`` bytes in all.
        zipfile.BadZipFile: not a zip archive.
    """
    budget = free_memory() if memory is None else memory
    total = 0
    with zipfile.ZipFile(source) as archive:
        for info in archive.infolist():
            name = info.filename
            if not name.endswith(".npy"):  # numpy reads such a member whole, as bytes
                total += info.file_size
                continue
            declared = _declared_bytes(archive, info)
            if declared > info.file_size:
                raise NpzTooLarge(
                    f"array {name[:-4]!r} declares {size_text(declared)} but its data is "
                    f"{size_text(info.file_size)}: a damaged or crafted file"
                )
            total += declared
    if budget is not None and total > budget:
        raise NpzTooLarge(
            f"its arrays need {size_text(total)} of memory; this machine has "
            f"{size_text(budget)} free"
        )


def _declared_bytes(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> int:
    name = info.filename[:-4]
    with archive.open(info) as member:
        try:
            version = npy_format.read_magic(member)
            if version == (1, 0):
                shape, _, dtype = npy_format.read_array_header_1_0(member)
            elif version in ((2, 0), (3, 0)):
                shape, _, dtype = npy_format.read_array_header_2_0(member)
            else:
                raise ValueError(f"unknown .npy format version {version}")
        except (ValueError, OSError, EOFError, SyntaxError) as exc:
            raise NpzTooLarge(f"array {name!r}: not a numpy array ({clip(str(exc))})") from None
    if not isinstance(dtype, np.dtype):
        raise NpzTooLarge(f"array {name!r}: not a numpy array (no dtype)")
    return math.prod(int(n) for n in shape) * dtype.itemsize
