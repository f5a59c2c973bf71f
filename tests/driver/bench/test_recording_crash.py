"""Recordings survive a crash: ``--record`` streams chunks to ``FILE.partial`` during the run.

A real ``hilbot run --backend sim`` child is killed with SIGKILL while it records; ``hilbot
replay`` then reads what it wrote and says it was cut short. On a full disk (a small tmpfs,
mounted in a private mount namespace with ``unshare``) the run goes on, says so in one line,
keeps the earlier recording at the same path and still writes ``--stats``.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import yaml

from hilbot.driver.bench.recording import Recording
from hilbot.driver.bench.stream import partial_path

WAIT = 90.0  # [s] start-up imports on a busy machine
SWING = {"loop": True, "waypoints": [{"t": 0.0, "joints": {"joint1": 0.0}},
                                     {"t": 0.5, "joints": {"joint1": 0.4}},
                                     {"t": 1.0, "joints": {"joint1": 0.0}}]}  # fmt: skip


def hilbot(*args: str) -> list[str]:
    return [sys.executable, "-m", "hilbot", *args]


def run_args(tmp_path: Path, record: Path | None, *extra: str) -> list[str]:
    traj = tmp_path / "swing.yaml"
    traj.write_text(yaml.safe_dump(SWING))
    recording = [] if record is None else ["--record", str(record)]
    return hilbot(
        "run", "openmanipulator_x", "--backend", "sim", "--no-mqtt", "--no-status", "--enable",
        "--trajectory", str(traj), *recording, *extra,
    )  # fmt: skip


def wait_for(condition: Callable[[], bool], what: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if proc.poll() is not None:
            pytest.fail(f"hilbot run exited ({proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {WAIT} s")
        time.sleep(0.05)


def chunks(record: Path) -> list[Path]:
    folder = partial_path(record)
    return sorted(folder.glob("chunk-*.npz")) if folder.is_dir() else []


def test_sigkill_leaves_a_recording_that_replay_reads_and_calls_cut_short(tmp_path):
    record = tmp_path / "run.npz"
    proc = subprocess.Popen(
        run_args(tmp_path, record, "--duration", "600"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: len(chunks(record)) >= 3, "three chunks of the recording", proc)
        written = len(chunks(record))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not record.exists()  # the final file is only written by a clean end
    recording = Recording.load(record)  # the partial form, by the path the run was given
    assert recording.cut_short
    # Every chunk seen before the kill is in it (each holds about a second of cycles).
    assert recording["t"][-1] >= written - 1.5
    assert (np.diff(recording["cycle"]) == 1).all()  # no cycle missing between chunks
    q1 = recording["q_command"][:, recording.header.joint_names.index("joint1")]
    assert np.nanmax(q1) > 0.3  # the swing is in it
    replay = subprocess.run(
        hilbot("replay", str(record), "--quiet"), capture_output=True, text=True, timeout=WAIT
    )
    # 1: commands differ, as they may for any real-time run whose ticks came late (the
    # replay's fake clock has none); the replay itself ran over every recorded cycle.
    assert replay.returncode in (0, 1), replay.stderr
    said = [line for line in replay.stdout.splitlines() if "cut short" in line]
    assert said == [
        f"recording cut short at {recording['t'][-1]:.1f} s (the run did not end cleanly)"
    ]
    assert f"replaying {recording.n_cycles} cycles of {record}" in replay.stdout
    assert "Traceback" not in replay.stderr


def test_a_clean_end_writes_the_npz_and_removes_the_partial_folder(tmp_path):
    record = tmp_path / "run.npz"
    ran = subprocess.run(
        run_args(tmp_path, record, "--duration", "2.5"),
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert ran.returncode == 0, ran.stderr
    assert record.is_file() and not partial_path(record).exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp files
    recording = Recording.load(record)
    assert not recording.cut_short
    assert recording["t"][-1] > 2.0
    assert np.isfinite(recording["ee_measured"]).all()


def test_an_earlier_partial_is_never_overwritten(tmp_path):
    record = tmp_path / "run.npz"
    partial_path(record).mkdir()
    ran = subprocess.run(
        run_args(tmp_path, record, "--duration", "1"), capture_output=True, text=True, timeout=WAIT
    )
    assert ran.returncode == 2
    assert ran.stderr.count("\n") == 1 and "run.npz.partial" in ran.stderr
    assert "cut short" in ran.stderr


def _unshare_mount_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k none /mnt || exit 1"],
        capture_output=True,
    )
    return probe.returncode == 0


FULL_DISK = """
set -e
mount -t tmpfs -o size={size} none "$DISK"
cp "$EARLIER" "$DISK/run.npz"
dd if=/dev/zero of="$DISK/filler" bs=1k count={filler} 2>/dev/null
set +e
"$@" --record "$DISK/run.npz" --stats "$OUT/stats.json" > "$OUT/stdout.txt" 2> "$OUT/stderr.txt"
echo $? > "$OUT/rc"
rm -f "$DISK/filler"
cp -r "$DISK/." "$OUT/disk/"
"""


@pytest.mark.skipif(not _unshare_mount_works(), reason="needs unshare -rm and tmpfs mounts")
def test_a_full_disk_keeps_the_earlier_recording_and_still_writes_stats(tmp_path):
    earlier = tmp_path / "earlier.npz"
    ran = subprocess.run(
        run_args(tmp_path, earlier, "--duration", "1"), capture_output=True, timeout=WAIT
    )
    assert ran.returncode == 0, ran.stderr
    before = earlier.read_bytes()
    disk, out = tmp_path / "disk", tmp_path / "out"
    disk.mkdir()
    (out / "disk").mkdir(parents=True)
    # 1 MiB of tmpfs, the earlier recording and a filler leave ~48 KiB: the header and a
    # chunk or two fit, then every write fails with ENOSPC while the run goes on.
    filler = 1024 - 48 - len(before) // 1024
    script = FULL_DISK.format(size="1m", filler=filler)
    args = run_args(tmp_path, None, "--duration", "5")  # --record and --stats: the script
    env = {"DISK": str(disk), "EARLIER": str(earlier), "OUT": str(out)}
    subprocess.run(
        ["unshare", "-rm", "sh", "-c", script, "sh", *args],
        env={**dict(__import__("os").environ), **env},
        timeout=WAIT,
        check=True,
    )
    stderr = (out / "stderr.txt").read_text()
    stdout = (out / "stdout.txt").read_text()
    assert int((out / "rc").read_text()) == 1, stderr
    kept = out / "disk" / "run.npz"
    assert kept.read_bytes() == before, "the earlier recording at the same path is kept"
    full = [line for line in stderr.splitlines() if "No space left on device" in line]
    assert len(full) == 2, stderr  # once when streaming stopped, once for the final file
    assert f"the earlier {disk / 'run.npz'} is kept" in full[1]
    assert f"(hilbot replay {disk / 'run.npz.partial'})" in full[1]
    # --stats on another disk: the recording's failure no longer keeps it from being written.
    stats = json.loads((out / "stats.json").read_text())
    assert stats["cycles"] > 400  # the run went on for its 5 s after the disk filled
    assert "shutdown: torque off" in stdout
    assert [p.name for p in (out / "disk").iterdir() if p.name.startswith(".")] == []
    # What was streamed before the disk filled is readable, and called cut short.
    partial = Recording.load(out / "disk" / "run.npz.partial")
    assert partial.cut_short and partial.n_cycles > 0


def test_a_bench_run_killed_mid_scenario_leaves_its_recording(tmp_path):
    out = tmp_path / "out"
    record = out / "recording.npz"
    args = hilbot(
        "bench", "openmanipulator_x", "--scenario", "openmanipulator_sweep", "--out", str(out),
        "--duration-scale", "20", "--no-plots", "--quiet",
    )  # fmt: skip
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: len(chunks(record)) >= 3, "three chunks of the recording", proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    recording = Recording.load(record)
    assert recording.cut_short and recording["t"][-1] >= 1.5
    assert recording.header.scenario is not None
    assert recording.header.scenario["name"] == "openmanipulator_sweep"
    assert recording.header.commands[0]["command"] == "enable"  # the log streams with it
    # A new bench run into the same folder refuses to overwrite it, in one line.
    again = subprocess.run(args, capture_output=True, text=True, timeout=WAIT)
    assert again.returncode == 2 and again.stderr.count("\n") == 1
    assert "recording.npz.partial holds the recording of an earlier run" in again.stderr


def test_a_bench_run_that_ends_writes_recording_npz_and_no_partial(tmp_path, capsys):
    from hilbot.driver.cli import main

    out = tmp_path / "out"
    args = ["bench", "openmanipulator_x", "--scenario", "openmanipulator_step", "--out", str(out)]
    code = main([*args, "--clock", "fake", "--no-plots", "--quiet"])
    assert code in (0, 1), capsys.readouterr()  # thresholds are not this test's concern
    assert (out / "recording.npz").is_file()
    assert not partial_path(out / "recording.npz").exists()
    recording = Recording.load(out / "recording.npz")
    assert not recording.cut_short and recording.n_cycles > 100


async def test_the_streamed_chunks_hold_exactly_the_cycles_the_recording_holds(tmp_path):
    """Chunk boundaries lose, repeat or change no row, clamp event or logged command."""
    from hilbot.driver.bench.backends import BackendKind, ClockKind
    from hilbot.driver.bench.recording import CHANNELS
    from hilbot.driver.bench.runner import RunOptions, run_bench
    from hilbot.driver.bench.scenario import load_scenario, resolve_scenario
    from hilbot.driver.runtime.config import load_config

    scenario = load_scenario(resolve_scenario("openmanipulator_faults")).scaled(0.5)
    record = tmp_path / "recording.npz"
    options = RunOptions(clock="fake", progress=False, record_to=record)
    recording = await run_bench(
        load_config("openmanipulator_x"), scenario, BackendKind.SIM, ClockKind.FAKE, options
    )
    assert len(chunks(record)) >= 3  # seconds of cycles, one chunk a second
    streamed = Recording.load(partial_path(record))
    assert streamed.cut_short and streamed.n_cycles == recording.n_cycles
    for name in set(CHANNELS) - {"ee_measured"}:  # FK is computed for the final file only
        np.testing.assert_array_equal(streamed[name], recording[name], err_msg=name)
    np.testing.assert_array_equal(streamed.clamp_events, recording.clamp_events)
    assert recording.header.faults and streamed.header.faults == recording.header.faults
    assert streamed.header.commands == recording.header.commands


def test_a_partial_recording_without_cycles_replays_in_one_line(tmp_path):
    from hilbot.driver.bench.recording import RecordingHeader
    from hilbot.driver.cli import main

    folder = tmp_path / "run.npz.partial"
    folder.mkdir()
    header = RecordingHeader(("joint1",), ("arm",), 100.0, config_path="openmanipulator_x")
    (folder / "header.json").write_text(header.to_json())
    recording = Recording.load(tmp_path / "run.npz")
    assert recording.cut_short and recording.n_cycles == 0
    (folder / "header.json").unlink()
    assert main(["replay", str(tmp_path / "run.npz"), "--quiet"]) == 2


def test_an_interrupted_bench_run_says_where_its_cycles_are(tmp_path):
    out = tmp_path / "out"
    record = out / "recording.npz"
    args = hilbot(
        "bench", "openmanipulator_x", "--scenario", "openmanipulator_sweep", "--out", str(out),
        "--duration-scale", "20", "--no-plots", "--quiet",
    )  # fmt: skip
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: len(chunks(record)) >= 2, "two chunks of the recording", proc)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    folder = partial_path(record)
    assert err.splitlines()[-1] == (
        f"hilbot bench: interrupted; the cycles recorded until then are in {folder} "
        f"(hilbot replay {folder})"
    )
    assert Recording.load(folder).n_cycles > 0
