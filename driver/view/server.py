"""Open the viser server behind the view, with errors the command line can print."""

from __future__ import annotations

import errno
import socket
from typing import Any

from hilbot.driver.runtime.errors import DriverError


class ViewError(DriverError):
    """The live view cannot be served (viser missing, port taken)."""


def open_server(host: str, port: int) -> Any:
    """A running ``viser.ViserServer`` on ``host:port`` (0: a free port).

    Raises:
        ViewError: viser is not installed, or the port is taken.
    """
    try:
        import viser
    except ImportError:
        raise ViewError(
            "--view needs viser, the view extra: pip install '.[view]' in the hilbot clone"
        ) from None
    if not 0 <= port <= 65535:
        raise ViewError(f"--view-port must be in 0..65535, got {port}")
    if port == 0:
        port = _free_port(host)
    else:
        _check_free(host, port)
    return viser.ViserServer(host=host, port=port, verbose=False)


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _check_free(host: str, port: int) -> None:
    # viser moves on to the next port when one is taken; the user asked for this one.
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ViewError(
                    f"--view-port {port} is in use on {host}; pick another (0: any free one)"
                ) from None
            raise ViewError(f"cannot serve the view on {host}:{port}: {exc.strerror}") from None
