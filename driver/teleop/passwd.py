"""Add a login to a password file for the embedded broker: ``python -m ...teleop.passwd``.

    python -m hilbot.driver.teleop.passwd FILE USER   # asks for the password twice

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


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m hilbot.driver.teleop.passwd")
    parser.add_argument("file", type=Path)
    parser.add_argument("user")
    parser.add_argument(
        "--stdin", action="store_true", help="read the password from the first line of stdin"
    )
    args = parser.parse_args(argv)
    if args.stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = getpass.getpass(f"password for {args.user}: ")
        if getpass.getpass("again: ") != password:
            print("the passwords differ", file=sys.stderr)
            return 2
    try:
        add_user(args.file, args.user, password)
    except (ValueError, OSError) as exc:
        print(f"passwd: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
