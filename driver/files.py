"""Write a file so that it is either complete or not there: a temporary name, then a rename.

A crash, a full disk or an error mid-write leaves the earlier file at ``path`` as it was;
the temporary file (``.NAME.PID.tmp`` next to it) is removed when the write fails.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO


def temporary_sibling(path: Path) -> Path:
    """The temporary name ``path`` is written under: hidden, in the same folder."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


@contextlib.contextmanager
def _removed_on_error(tmp: Path) -> Iterator[None]:
    try:
        yield
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write_atomic(path: Path, write: Callable[[BinaryIO], object], *, sync: bool = True) -> Path:
    """Write ``path`` with ``write(fh)`` into a temporary sibling, then rename it into place.

    Args:
        path: the file to (re)place.
        write: writes the whole content to the open binary file it is given.
        sync: flush the content to the disk before the rename (a power cut then leaves the
            old or the new file, never an empty one).

    Raises:
        OSError: the write or the rename failed; ``path`` is unchanged and the temporary
            file is gone.
    """
    tmp = temporary_sibling(path)
    with _removed_on_error(tmp):
        with tmp.open("wb") as fh:
            write(fh)
            fh.flush()
            if sync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    return path


def write_text_atomic(path: Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file and a rename."""
    data = text.encode("utf-8")
    return write_atomic(path, lambda fh: fh.write(data))
