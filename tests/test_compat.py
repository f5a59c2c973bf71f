"""hilbot._compat and hilbot._compat_asyncio behave as Python 3.11's own names, on 3.10 too."""

from __future__ import annotations

import asyncio
import enum
import sys
import warnings

import pytest

from hilbot import _compat_asyncio as aio
from hilbot._compat import BaseExceptionGroup, ExceptionGroup, StrEnum, split_group


class Color(StrEnum):
    RED = "red"
    GREEN = enum.auto()


def test_str_enum_members_are_their_values():
    assert Color.RED == "red" and isinstance(Color.RED, str)
    assert str(Color.RED) == "red" and f"{Color.RED}" == "red" and f"{Color.RED:>5}" == "  red"
    assert Color.GREEN == "green"  # auto() is the lower-cased name, as 3.11's
    assert Color("red") is Color.RED


def test_on_3_11_and_later_the_names_are_the_standard_ones():
    if sys.version_info < (3, 11):
        pytest.skip("Python 3.10 uses the backports")
    import builtins

    assert StrEnum is enum.StrEnum
    assert BaseExceptionGroup is builtins.BaseExceptionGroup
    assert aio.TaskGroup is asyncio.TaskGroup and aio.timeout is asyncio.timeout


def test_split_group_is_what_except_star_sees():
    error, other = KeyError("k"), OSError("o")
    matched, rest = split_group(ExceptionGroup("g", [error, other]), KeyError)
    assert matched is not None and list(matched.exceptions) == [error]
    assert rest is not None and list(rest.exceptions) == [other]
    matched, rest = split_group(error, KeyError)  # a bare exception is a group of one
    assert matched is not None and list(matched.exceptions) == [error] and rest is None
    assert split_group(other, KeyError) == (None, other)


async def test_a_task_group_raises_the_compat_exception_group():
    async def fail() -> None:
        raise KeyError("child")

    with pytest.raises(BaseExceptionGroup) as info:
        async with aio.TaskGroup() as group:
            group.create_task(fail())
    assert [type(e) for e in info.value.exceptions] == [KeyError]


async def test_the_timeout_raises_the_builtin_timeout_error():
    with pytest.raises(TimeoutError):
        async with aio.timeout(0.01):
            await asyncio.sleep(10)


async def test_a_cancel_from_outside_is_not_taken_for_the_timeout():
    # A cancel that arrives inside the block goes through as a cancel, even when the
    # timeout has expired too: the timeout turns only its own cancel into TimeoutError.
    entered = asyncio.Event()

    async def body() -> None:
        async with aio.timeout(0.05):
            entered.set()
            try:
                await asyncio.sleep(10)
            finally:
                await asyncio.sleep(0.1)  # the deadline passes while the cancel is pending

    task = asyncio.create_task(body())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()


def test_the_compat_modules_are_leaves():
    # Every package (kinematics too) may import them: they import no other hilbot module.
    import ast
    from pathlib import Path

    import hilbot

    for name in ("_compat.py", "_compat_asyncio.py"):
        tree = ast.parse((Path(hilbot.__file__).parent / name).read_text(encoding="utf-8"))
        imported = {
            alias.name if isinstance(node, ast.Import) else node.module or ""
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in node.names
        }
        assert not {m for m in imported if m.split(".")[0] == "hilbot"}, name


async def test_a_cancel_before_an_mqtt_wait_starts_leaves_no_coroutine_unawaited():
    # On 3.10 the backport's timeout suspends while it is entered: a cancel arriving then
    # must not leave aiomqtt's `confirmation.wait()` unawaited (a RuntimeWarning at garbage
    # collection, an error under this suite's warning filter).
    import gc

    from hilbot.driver.teleop.client import MqttClient

    client = MqttClient("127.0.0.1", port=1)  # never connected: only _wait_for is used
    event = asyncio.Event()
    task = asyncio.create_task(client._wait_for(event.wait(), 5.0))
    await asyncio.sleep(0)  # it starts, and suspends in the timeout (3.10) or the wait
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del task
        gc.collect()
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []
