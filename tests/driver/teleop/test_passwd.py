"""``python -m hilbot.driver.teleop.passwd`` at a terminal, and without one.

The command runs as a child process whose controlling terminal is a pseudo-terminal (so
getpass asks there, and Ctrl-C is a SIGINT as at a shell); the test types what a person
would. Every way of not giving a password ends in one line and a non-zero exit, never a
traceback, and writes nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX pseudo-terminals")

#: [s] for a prompt to appear or the command to end (the hash takes a fraction of a second;
#: a busy host is many times slower).
WAIT = 60.0
#: Started in the child: a session whose controlling terminal is the pty on its stdin,
#: then the command itself.
SESSION = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.executable, [sys.executable, '-m', 'hilbot.driver.teleop.passwd', "
    "*sys.argv[1:]])"
)
PROMPT = "password for alice: "


class Terminal:
    """The person's side of the pseudo-terminal the command runs on."""

    def __init__(self, *argv: str) -> None:
        controller, terminal = os.openpty()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", SESSION, *argv],
                stdin=terminal,
                stdout=terminal,
                stderr=terminal,
                start_new_session=True,
            )
        except BaseException:
            os.close(controller)
            raise
        finally:
            os.close(terminal)
        self._controller = controller
        self._screen = b""
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._controller, 65536)
            except OSError:  # EIO: the command's end of the terminal is closed
                chunk = b""
            with self._changed:
                self._screen += chunk
                self._changed.notify_all()
            if not chunk:
                return

    @property
    def screen(self) -> str:
        with self._changed:
            return self._screen.decode(errors="replace")

    def expect(self, text: str) -> None:
        deadline = time.monotonic() + WAIT
        with self._changed:
            while text.encode() not in self._screen:
                left = deadline - time.monotonic()
                assert left > 0, f"no {text!r} on the terminal; it shows:\n{self.screen}"
                self._changed.wait(left)

    def type(self, keys: str) -> None:
        os.write(self._controller, keys.encode())

    def exit_code(self) -> int:
        code = self.proc.wait(WAIT)
        self._reader.join(WAIT)
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(WAIT)
        self._reader.join(WAIT)
        os.close(self._controller)


@pytest.fixture
def start(tmp_path):
    terminals = []

    def start(*options: str) -> Terminal:
        terminal = Terminal(str(tmp_path / "passwd"), "alice", *options)
        terminals.append(terminal)
        return terminal

    yield start
    for terminal in terminals:
        terminal.close()


def message_lines(screen: str) -> list[str]:
    """The lines the command printed after its prompts (prompts and blank lines dropped)."""
    lines = (line.replace(PROMPT, "").replace("again: ", "") for line in screen.splitlines())
    return [line.strip() for line in lines if line.strip()]


def test_a_password_typed_twice_is_written(start, tmp_path):
    terminal = start()
    terminal.expect(PROMPT)
    terminal.type("s3cret\r")
    terminal.expect("again: ")
    terminal.type("s3cret\r")
    assert terminal.exit_code() == 0, terminal.screen
    assert "s3cret" not in terminal.screen  # not echoed
    assert (tmp_path / "passwd").read_text().startswith("alice:$argon2")


@pytest.mark.parametrize(
    ("keys", "code", "line"),
    [
        ("\x04", 1, "passwd: the input ended at the password prompt; nothing written"),
        ("\x03", 130, "passwd: interrupted; nothing written"),
    ],
    ids=["ctrl-d", "ctrl-c"],
)
@pytest.mark.parametrize("at", ["first", "again"])
def test_giving_up_at_a_prompt_is_one_line(start, tmp_path, keys, code, line, at):
    terminal = start()
    terminal.expect(PROMPT)
    if at == "again":
        terminal.type("s3cret\r")
        terminal.expect("again: ")
    terminal.type(keys)
    assert terminal.exit_code() == code, terminal.screen
    assert message_lines(terminal.screen) == [line]
    assert not (tmp_path / "passwd").exists()


def run_without_terminal(tmp_path, *options):
    """The command in a session of its own with no controlling terminal, stdin a pipe."""
    argv = ["-m", "hilbot.driver.teleop.passwd", str(tmp_path / "pw"), "alice", *options]
    return subprocess.run(
        [sys.executable, *argv],
        input="s3cret\n",
        capture_output=True,
        text=True,
        timeout=WAIT,
        start_new_session=True,
        check=False,
    )


def test_without_a_terminal_it_names_stdin(tmp_path):
    # getpass has nowhere to ask without echoing the password
    done = run_without_terminal(tmp_path)
    assert done.returncode == 1
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("passwd: no terminal to ask the password on")
    assert "--stdin" in line
    assert not (tmp_path / "pw").exists()


def test_stdin_gives_the_password_without_a_terminal(tmp_path):
    done = run_without_terminal(tmp_path, "--stdin")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "pw").read_text().startswith("alice:$argon2")
