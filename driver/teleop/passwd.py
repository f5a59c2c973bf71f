"""Add a login to a password file for the embedded broker: ``python -m ...teleop.passwd``.

    python -m hilbot.driver.teleop.passwd FILE USER   # asks for the password twice
    echo PASSWORD | python -m hilbot.driver.teleop.passwd FILE USER --stdin

Exits 0 when the login is written; 1 when no password came (Ctrl+D at the prompt, or no
terminal to ask on: use --stdin); 2 on bad input (the passwords differ, a bad user name,
an empty password, a file that cannot be written); 130 on Ctrl+C.

Each line of FILE is ``user:hash`` with an argon2 hash (what amqtt's
FileAuthPlugin checks); a line for USER already there is replaced. Set
``teleop.password_file: FILE`` in the robot config, and give ``hilbot run`` the
same login through ``HILBOT_MQTT_USERNAME`` / ``HILBOT_MQTT_PASSWORD``.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path


def hash_password(password: str) -> str:
    """An argon2 hash of ``password``, as amqtt's FileAuthPlugin verifies it."""
    from pwdlib.hashers.argon2 import Argon2Hasher

    return str(Argon2Hasher().hash(password))


def add_user(path: Path, user: str, password: str) -> None:
    """Write (or replace) ``user``'s line in the password file ``path`` (mode 0600).

    Raises:
        ValueError: ``user`` is empty or has a ``:``, or ``password`` is empty.
    """
    if not user or ":" in user or any(c.isspace() for c in user):
        raise ValueError(f"user name {user!r}: it must be non-empty, without ':' or spaces")
    if not password:
        raise ValueError("the password must not be empty")
    lines = path.read_text().splitlines() if path.exists() else []
    kept = [line for line in lines if line.split(":", 1)[0] != user]
    kept.append(f"{user}:{hash_password(password)}")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write("\n".join(kept) + "\n")


#: The exit code of a run ended by Ctrl+C, as a shell reports a SIGINT (128 + 2).
EXIT_INTERRUPTED = 130
#: The exit code of a prompt that got no password (Ctrl+D, no terminal) or bad input.
EXIT_NO_PASSWORD = 1
EXIT_BAD_INPUT = 2


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m hilbot.driver.teleop.passwd")
    parser.add_argument("file", type=Path)
    parser.add_argument("user")
    parser.add_argument(
        "--stdin", action="store_true", help="read the password from the first line of stdin"
    )
    args = parser.parse_args(argv)
    try:
        password = _read_password(args.user, from_stdin=args.stdin)
        if password is None:
            return EXIT_BAD_INPUT
        add_user(args.file, args.user, password)
    except KeyboardInterrupt:
        _fail("interrupted; nothing written", after_prompt=True)
        return EXIT_INTERRUPTED
    except EOFError:
        _fail("the input ended at the password prompt; nothing written", after_prompt=True)
        return EXIT_NO_PASSWORD
    except getpass.GetPassWarning:
        _fail(
            "no terminal to ask the password on (stdin is not one); nothing written. "
            "Give it on stdin instead: echo PASSWORD | python -m hilbot.driver.teleop.passwd "
            f"{args.file} {args.user} --stdin"
        )
        return EXIT_NO_PASSWORD
    except (ValueError, OSError) as exc:
        _fail(str(exc))
        return EXIT_BAD_INPUT
    return 0


def _read_password(user: str, *, from_stdin: bool) -> str | None:
    """The password, from stdin or asked twice at the terminal; ``None`` if they differ.

    Raises:
        getpass.GetPassWarning: there is no terminal to ask on without echoing the password
            (getpass would read it, visibly, from stdin).
    """
    if from_stdin:
        return sys.stdin.readline().rstrip("\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error", getpass.GetPassWarning)
        password = getpass.getpass(f"password for {user}: ")
        again = getpass.getpass("again: ")
    if again != password:
        _fail("the passwords differ; nothing written")
        return None
    return password


def _fail(message: str, *, after_prompt: bool = False) -> None:
    """One line on stderr; on a line of its own after a prompt left unfinished."""
    if after_prompt and sys.stderr.isatty():
        print(file=sys.stderr)
    print(f"passwd: {message}", file=sys.stderr)


if __name__ == "__main__":
    raise SystemExit(main())
