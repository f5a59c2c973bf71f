"""Files that would exhaust the machine end in one short line, quickly.

A 1 KB YAML alias bomb in a config hung ``hilbot run`` (the error message quoted the
whole expanded input), a 200k-element list gave a 1.5 MB "line", an ``.npz`` declaring
a 4.8 GB array ended ``hilbot replay`` in a MemoryError traceback, and a YAML syntax
error printed 7 lines. All through the command line: its ``main`` in this process
(``hilbot_main``), and in a subprocess where the process is the point (a memory limit).
"""

from __future__ import annotations

import io
import resource
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

import hilbot.configs
from hilbot._bounded import MAX_ALIAS_EXPANSION, YamlTooLarge, load_yaml, quote
from hilbot.driver.bench.npz_check import NpzTooLarge, check_npz
from tests.driver.conftest import CliResult

WAIT = 180.0  # [s] start-up imports on a busy machine (a 200k-item YAML parses in seconds)
ROBOTS = Path(hilbot.configs.__file__).parent / "robots"
OPTIONS = "options: {max_iterations: 20}"  # the OpenManipulator-X's chain options


def hilbot(
    *args: str, cwd: Path, limit_memory: int | None = None
) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        if limit_memory is not None:  # as a machine with little memory would refuse it
            resource.setrlimit(resource.RLIMIT_AS, (limit_memory, limit_memory))

    return subprocess.run(
        [sys.executable, "-m", "hilbot", *args],
        capture_output=True,
        text=True,
        timeout=WAIT,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
        preexec_fn=limit if limit_memory is not None else None,
    )


def one_line(
    result: subprocess.CompletedProcess[str] | CliResult, command: str, longest: int = 500
) -> str:
    err = result.stderr
    assert "Traceback" not in err, err[:2000]
    lines = err.strip().splitlines()
    assert len(lines) == 1, err[:2000]
    assert lines[0].startswith(f"hilbot {command}: "), err[:2000]
    assert len(lines[0]) <= longest, lines[0][:2000]
    return lines[0]


def omx_with_options(tmp_path: Path, options: str) -> Path:
    text = (ROBOTS / "openmanipulator_x.yaml").read_text()
    assert OPTIONS in text
    path = tmp_path / "robot.yaml"
    path.write_text(
        text.replace(OPTIONS, f"options: {options}").replace(
            "urdf: openmanipulator_x.urdf", f"urdf: {ROBOTS / 'openmanipulator_x.urdf'}"
        )
    )
    return path


def alias_bomb(levels: int = 9) -> str:
    """``[&a0 [lol x9], &a1 [*a0 x9], ...]``: a few hundred bytes, 9**levels items."""
    items = ["&a0 [" + ", ".join(["lol"] * 9) + "]"]
    items += [f"&a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "[" + ", ".join(items) + "]"


@pytest.fixture
def in_tmp(tmp_path, monkeypatch, hilbot_main):
    """``hilbot_main``, run from ``tmp_path`` (as the subprocesses are)."""
    monkeypatch.chdir(tmp_path)
    return hilbot_main


def test_an_alias_bomb_in_a_config_is_refused_at_once(tmp_path, in_tmp):
    bomb = alias_bomb()
    assert len(bomb) < 1024
    path = omx_with_options(tmp_path, f"{{max_iterations: 20, bomb: {bomb}}}")
    start = time.monotonic()
    result = in_tmp("run", str(path), "--no-mqtt", "--duration", "1")
    assert result.returncode == 2
    line = one_line(result, "run")
    assert "alias" in line and str(path.name) in line, line
    assert time.monotonic() - start < WAIT / 2


def test_a_huge_list_in_a_config_gives_a_short_line(tmp_path, in_tmp):
    big = "[" + ", ".join(["1"] * 200_000) + "]"
    path = omx_with_options(tmp_path, f"{{max_iterations: 20, big: {big}}}")
    result = in_tmp("run", str(path), "--no-mqtt", "--duration", "1")
    assert result.returncode == 2
    line = one_line(result, "run", longest=400)
    assert "chains[0].options.big" in line and "..." in line, line


@pytest.mark.parametrize("kind", ["scenario", "trajectory"])
def test_a_huge_list_in_a_scenario_or_trajectory_gives_a_short_line(tmp_path, kind, in_tmp):
    big = "[" + ", ".join(["1"] * 20_000) + "]"  # a scenario's error was 80 bytes an item
    path = tmp_path / f"{kind}.yaml"
    if kind == "scenario":
        path.write_text(f"name: big\nsteps: {big}\n")
        args = ["bench", "openmanipulator_x", "--scenario", str(path), "--quiet"]
    else:
        path.write_text(f"waypoints:\n  - t: 0\n    joints: {{joint1: {big}}}\n")
        args = ["run", "--trajectory", str(path), "--enable", "--no-mqtt"]
    result = in_tmp(*args)
    assert result.returncode == 2
    one_line(result, args[0], longest=1500)


@pytest.mark.parametrize("kind", ["calibration", "config", "trajectory", "scenario"])
def test_a_yaml_syntax_error_is_one_line_with_file_line_and_column(tmp_path, kind, in_tmp):
    bad = tmp_path / f"{kind}.yaml"
    bad.write_text("joints:\n  a: [1, 2\n  b: 3\n")
    args = {
        "calibration": ["run", "--calibration", str(bad), "--no-mqtt", "--duration", "1"],
        "config": ["run", str(bad), "--no-mqtt", "--duration", "1"],
        "trajectory": ["run", "--trajectory", str(bad), "--enable", "--no-mqtt"],
        "scenario": ["bench", "openmanipulator_x", "--scenario", str(bad), "--quiet"],
    }[kind]
    result = in_tmp(*args)
    assert result.returncode == 2
    line = one_line(result, args[0])
    assert str(bad.name) in line and "line 3, column 4" in line, line


def crafted_npz(tmp_path: Path) -> Path:
    """A real recording whose time channel declares 600 million float64 (4.8 GB)."""
    good = tmp_path / "good.npz"
    done = hilbot("run", "--no-mqtt", "--duration", "0.3", "--record", str(good), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    crafted = tmp_path / "crafted.npz"
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(crafted, "w", zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "t.npy":
                header = io.BytesIO()
                np.lib.format.write_array_header_1_0(
                    header, {"descr": "<f8", "fortran_order": False, "shape": (600_000_000,)}
                )
                data = header.getvalue() + bytes(4_600_000)
            out.writestr(info.filename, data)
    return crafted


def test_an_npz_declaring_a_huge_array_is_refused_in_one_line(tmp_path):
    crafted = crafted_npz(tmp_path)
    # 3 GB of address space: the declared array cannot be allocated
    result = hilbot("replay", str(crafted), "--quiet", cwd=tmp_path, limit_memory=3 * 2**30)
    assert result.returncode == 2
    line = one_line(result, "replay")
    assert "array 't' declares 4.8 GB but its data is 4.6 MB" in line, line


def test_an_npz_needing_more_memory_than_is_free_is_refused(tmp_path):
    buffer = io.BytesIO()
    np.savez_compressed(buffer, t=np.zeros(1_000_000))  # 8 MB, honestly declared
    buffer.seek(0)
    check_npz(buffer, memory=9_000_000)
    buffer.seek(0)
    with pytest.raises(NpzTooLarge, match=r"need 8\.0 MB of memory; this machine has 1\.0 MB"):
        check_npz(buffer, memory=1_000_000)


def test_yaml_aliases_within_the_limit_load_and_beyond_it_are_refused():
    assert load_yaml("d: &d {a: 1}\ne: *d\nf: [*d, *d]") == {
        "d": {"a": 1},
        "e": {"a": 1},
        "f": [{"a": 1}, {"a": 1}],
    }
    with pytest.raises(YamlTooLarge, match="alias bomb"):
        load_yaml(alias_bomb(7))  # 9**7 > MAX_ALIAS_EXPANSION
    assert MAX_ALIAS_EXPANSION < 9**7
    with pytest.raises(YamlTooLarge, match="recursive"):
        load_yaml("a: &a [*a]")
    with pytest.raises(YamlTooLarge, match="nested too deeply"):
        load_yaml("[" * 100_000 + "]" * 100_000)


def test_a_quote_is_bounded_whatever_the_value():
    shared = ["lol"] * 9
    for _ in range(12):
        shared = [shared] * 9  # 9**12 items: repr() would never end
    start = time.monotonic()
    assert len(quote(shared)) <= 200
    assert len(quote("x" * 10**7)) <= 200
    assert time.monotonic() - start < 5
