"""A mosquitto broker process for the MQTT benchmarks (estop_bench, teleop_bench)."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def mosquitto(port: int, *, kill: bool = False) -> Iterator[subprocess.Popen[bytes]]:
    """Run mosquitto on ``127.0.0.1:port``; yield its process once it accepts connections.

    Args:
        port: the listener's port.
        kill: stop it with SIGKILL instead of SIGTERM.
    """
    binary = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    with tempfile.TemporaryDirectory() as tmp:
        conf = Path(tmp) / "mosquitto.conf"
        conf.write_text(
            f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
            "set_tcp_nodelay true\n"  # as docs/teleop.md advises: no Nagle delay on sends
        )
        process = subprocess.Popen(
            [binary, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            deadline = time.monotonic() + 5
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), 0.2).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.02)
            yield process
        finally:
            if kill:
                process.kill()
                process.wait()
            else:
                process.terminate()
                process.wait(5)
