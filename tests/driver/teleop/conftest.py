"""Fixtures: a real mosquitto broker on 127.0.0.1, and a simulated robot runtime."""

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

import hilbot.configs
from hilbot.driver.runtime.backends import build_backend
from hilbot.driver.runtime.config import parse_config
from hilbot.driver.runtime.loop import Runtime
from hilbot.driver.teleop import TeleopSettings, serve
from hilbot.sim.sim_backend import SimBackend

#: The broker the MQTT tests start; HILBOT_TEST_MOSQUITTO names another binary (a path that
#: does not exist: the tests that need a broker skip, as on a machine without mosquitto).
MOSQUITTO = (
    os.environ.get("HILBOT_TEST_MOSQUITTO")
    or shutil.which("mosquitto")
    or "/usr/sbin/mosquitto"  # not on a user's PATH on Debian
)
#: The one line (pytest -ra) that every test needing the broker is skipped with.
NO_MOSQUITTO = "needs the mosquitto broker: sudo apt-get install -y mosquitto"
ROBOTS = Path(hilbot.configs.__file__).parent / "robots"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 30.0) -> None:  # a busy host starts it late
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.02)
    raise TimeoutError(f"mosquitto did not listen on {port} within {timeout} s")


class Mosquitto:
    """A mosquitto process on 127.0.0.1:port; stop() kills it, start() brings it back."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        self.config = directory / "mosquitto.conf"
        self.config.write_text(
            f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
        )
        self.log = directory / "mosquitto.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    def start(self) -> None:
        assert self.process is None
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [MOSQUITTO, "-c", str(self.config)], stdout=log, stderr=subprocess.STDOUT
            )
        wait_for_port(self.port)

    def stop(self) -> None:
        """Kill the broker (SIGKILL: no clean disconnect for anyone)."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(5)
            self.process = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Every skip for want of mosquitto reported at one place: one line under pytest -ra."""
    report = yield
    longrepr = report.longrepr
    if report.skipped and isinstance(longrepr, tuple) and NO_MOSQUITTO in str(longrepr[2]):
        where = Path(__file__).relative_to(item.config.rootpath).as_posix()
        report.longrepr = (where, None, longrepr[2])
    return report


@pytest.fixture
def mosquitto(tmp_path):
    if not Path(MOSQUITTO).exists():
        pytest.skip(NO_MOSQUITTO)
    broker = Mosquitto(tmp_path)
    broker.start()
    yield broker
    broker.stop()


def omx_config(**overrides):
    """The OpenManipulator-X config, with ``overrides`` merged at the top level."""
    data = yaml.safe_load((ROBOTS / "openmanipulator_x.yaml").read_text())
    data.update(overrides)
    return parse_config(data, base_dir=ROBOTS)


@contextlib.asynccontextmanager
async def running_virtual():
    """The OpenManipulator-X on the virtual Dynamixel bus (a child process serving a pty),
    driven by the real Dynamixel backend: what ``hilbot run --backend virtual`` does."""
    config = omx_config()
    async with build_backend(config, "virtual") as backend, Runtime(config, backend) as runtime:
        yield runtime


@contextlib.asynccontextmanager
async def running_sim(*, chains=True):
    """The OpenManipulator-X on the simulated backend, running (disarmed) at its 200 Hz.

    ``chains=False`` drops its IK chain, for tests of joint targets and commands only.
    """
    config = omx_config() if chains else omx_config(chains=[])
    backend = SimBackend(config.servo_specs(), initial_positions=config.home)
    async with Runtime(config, backend) as runtime:
        yield runtime


FAST = TeleopSettings(keepalive_s=1, reconnect_min_s=0.05, reconnect_max_s=0.4, state_rate_hz=50)


@contextlib.asynccontextmanager
async def serving(runtime, url, settings=FAST, *, isolate=False, **kwargs):
    """Run ``serve`` for ``runtime`` and yield its bridge (or worker link) once connected.

    In-process by default (fast to start, exact counters); ``isolate=True`` runs
    the MQTT side in the worker process, as ``hilbot run`` does.
    """
    ready = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve(runtime, settings, url, robot_name="omx", ready=ready, isolate=isolate, **kwargs)
    )
    done, _ = await asyncio.wait({task, ready}, timeout=20, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        task.result()  # raises what serve raised
    assert ready in done, "the bridge did not connect within 20 s"
    try:
        yield ready.result()
    finally:
        await cancel_and_wait(task)


async def cancel_and_wait(task, timeout=10.0):
    """Cancel ``task`` once and wait for it; fail, with every task's stack, if it does not stop.

    One cancel must do: a swallowed one (Python 3.11 ``wait_for``) hangs a real shutdown,
    since a TaskGroup cancels each child only once. After a failure, cancel until it goes.
    """
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=timeout)
    if done:
        with contextlib.suppress(asyncio.CancelledError):
            task.result()
        return
    for other in asyncio.all_tasks():
        print(f"--- task {other.get_name()}", file=sys.stderr, flush=True)
        other.print_stack(limit=20, file=sys.stderr)
    for _ in range(10):
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=1.0)
        if done:
            break
    raise AssertionError(f"task {task.get_name()} ignored a cancel for {timeout} s")


async def eventually(predicate, timeout=5.0, interval=0.01, what="condition"):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        await asyncio.sleep(interval)


class Kit:
    """The helpers above, for tests (conftest modules cannot be imported by tests)."""

    running_sim = staticmethod(running_sim)
    running_virtual = staticmethod(running_virtual)
    serving = staticmethod(serving)
    eventually = staticmethod(eventually)
    omx_config = staticmethod(omx_config)
    free_port = staticmethod(free_port)
    fast = FAST


@pytest.fixture
def kit():
    return Kit


@pytest.fixture(autouse=True)
async def no_task_outlives_its_test():
    """After 60 s in one test, print every asyncio task's stack (diagnoses hangs in CI).

    At teardown, cancel what the test left running and fail, with stacks, if a task
    ignores cancellation: otherwise the event loop's own shutdown waits for it forever.
    """

    def dump(tasks):
        for task in tasks:
            print(f"--- task {task.get_name()}", file=sys.stderr, flush=True)
            task.print_stack(limit=20, file=sys.stderr)

    async def dump_later():
        await asyncio.sleep(60)
        dump(asyncio.all_tasks())

    guard = asyncio.get_running_loop().create_task(dump_later())
    yield
    guard.cancel()
    me = asyncio.current_task()
    leftovers = {t for t in asyncio.all_tasks() if t is not me and not t.done()}
    for task in leftovers:
        task.cancel()
    if leftovers:
        _, stuck = await asyncio.wait(leftovers, timeout=5.0)
        if stuck:
            dump(stuck)
            raise AssertionError(f"{len(stuck)} task(s) ignored cancellation: {stuck}")
