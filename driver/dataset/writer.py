"""A LeRobotDataset v3 writer that loses no finished episode.

The layout is LeRobot's (``codebase_version`` v3.0)::

    meta/info.json                              fps, features, totals, paths
    meta/stats.json                             per feature min/max/mean/std/count/q01..q99
    meta/tasks.parquet                          task_index, the task string as pandas' index
    meta/episodes/chunk-000/file-NNN.parquet    one row per episode: length, where its
                                                frames are, its tasks and stats
    data/chunk-000/file-NNN.parquet             the frames: observation.state, action,
                                                timestamp, frame_index, episode_index,
                                                index, task_index

LeRobot appends episodes to one data file and writes the episodes' metadata when the
dataset is finalized, so a crash loses what was recorded. Here each finished episode
gets its own data file and its own episodes file (LeRobot reads every
``chunk-*/file-*.parquet``), written under a temporary name and renamed, then ``info.json``,
``stats.json`` and ``tasks.parquet`` are rewritten the same way. A ``kill -9`` at any moment
leaves every finished episode readable, with contiguous indices; the episode being
recorded is lost. An interrupted write leaves only a ``.tmp`` file, and a kill between an
episode's two renames a data file without its metadata: the next open removes both and
rewrites the metadata to match (``DatasetWriter._repair``).
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hilbot.driver.runtime.errors import DriverError

CODEBASE_VERSION = "v3.0"
CHUNKS_SIZE = 1000  # files per chunk folder, as LeRobot
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)
#: The frame bookkeeping columns every LeRobot dataset has, after the features.
INDEX_COLUMNS = ("frame_index", "episode_index", "index", "task_index")


class DatasetError(DriverError):
    """The dataset folder cannot be written, or holds something else."""


def _pyarrow() -> tuple[Any, Any]:
    try:  # untyped, and optional: by name
        pa = importlib.import_module("pyarrow")
        pq = importlib.import_module("pyarrow.parquet")
    except ImportError:
        raise DatasetError(
            "--dataset writes parquet files with pyarrow: pip install '.[dataset]' (in the clone)"
        ) from None
    return pa, pq


def _stats(values: NDArray[Any]) -> dict[str, Any]:
    """LeRobot's per-feature statistics of ``values`` (frames x dims)."""
    data = values.astype(np.float64)
    out: dict[str, Any] = {
        "min": data.min(axis=0),
        "max": data.max(axis=0),
        "mean": data.mean(axis=0),
        "std": data.std(axis=0),
        "count": np.array([len(data)]),
    }
    for q in QUANTILES:
        out[f"q{round(q * 100):02d}"] = np.quantile(data, q, axis=0)
    return out


def _merge(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Statistics of the episodes together (quantiles: the count-weighted mean, as LeRobot)."""
    counts = np.array([float(p["count"][0]) for p in parts])
    weights = counts / counts.sum()
    means = np.stack([np.asarray(p["mean"], dtype=np.float64) for p in parts])
    mean = (weights[:, None] * means).sum(axis=0)
    var = sum(
        w * (np.asarray(p["std"], dtype=np.float64) ** 2 + (m - mean) ** 2)
        for w, p, m in zip(weights, parts, means, strict=True)
    )
    out: dict[str, Any] = {
        "min": np.min([p["min"] for p in parts], axis=0),
        "max": np.max([p["max"] for p in parts], axis=0),
        "mean": mean,
        "std": np.sqrt(var),
        "count": np.array([int(counts.sum())]),
    }
    for key in parts[0]:
        if key.startswith("q"):
            out[key] = (weights[:, None] * np.stack([p[key] for p in parts])).sum(axis=0)
    return out


def _plain(stats: dict[str, Any]) -> dict[str, list[Any]]:
    return {k: np.asarray(v).tolist() for k, v in stats.items()}


@dataclass
class _Episode:
    index: int
    task_index: int
    frames: list[tuple[list[float], list[float]]] = field(default_factory=list)


class DatasetWriter:
    """Write episodes of joint states and actions to a LeRobotDataset v3 folder.

    Args:
        root: the dataset folder (created; a new dataset, or one this writer wrote, to
            which episodes are appended).
        fps: frames per second.
        names: the joint features' names (``shoulder_pan.pos``...), the same for the
            observed state and the action.
        robot_type: LeRobot's robot type.

    Raises:
        DatasetError: pyarrow missing, the folder not writable, or another dataset there.
    """

    def __init__(self, root: Path, fps: int, names: Sequence[str], robot_type: str) -> None:
        self._pa, self._pq = _pyarrow()
        self.root = root
        self.fps = fps
        self.names = list(names)
        self.robot_type = robot_type
        self._episodes: list[dict[str, Any]] = []  # per finished episode: its metadata row
        self._tasks: list[str] = []
        self._current: _Episode | None = None
        try:
            root.mkdir(parents=True, exist_ok=True)
            for tmp in root.rglob("*.tmp"):
                tmp.unlink()
        except OSError as exc:
            raise DatasetError(f"cannot write the dataset {root}: {exc.strerror}") from None
        self._resume()

    @property
    def features(self) -> dict[str, Any]:
        """``info.json``'s features."""
        joint = {"dtype": "float32", "shape": [len(self.names)], "names": self.names}
        scalar = {"shape": [1], "names": None}
        return {
            "observation.state": joint,
            "action": dict(joint),
            "timestamp": {"dtype": "float32", **scalar},
            **{name: {"dtype": "int64", **scalar} for name in INDEX_COLUMNS},
        }

    @property
    def total_episodes(self) -> int:
        """Finished episodes in the dataset."""
        return len(self._episodes)

    @property
    def total_frames(self) -> int:
        """Frames of the finished episodes."""
        return sum(int(e["length"]) for e in self._episodes)

    def _resume(self) -> None:
        info_path = self.root / "meta" / "info.json"
        if not info_path.exists():
            if any(self.root.iterdir()):
                raise DatasetError(f"{self.root} is not empty and holds no LeRobot dataset")
            return
        try:
            info = json.loads(info_path.read_text())
        except (OSError, ValueError) as exc:
            raise DatasetError(f"cannot read {info_path}: {exc}") from None
        names = info.get("features", {}).get("action", {}).get("names")
        if info.get("fps") != self.fps or names != self.names:
            raise DatasetError(
                f"{self.root} holds a dataset of other features or fps "
                f"({info.get('fps')} fps, {names}); give another --dataset folder"
            )
        if info.get("codebase_version") != CODEBASE_VERSION:
            raise DatasetError(f"{self.root} is not a LeRobotDataset {CODEBASE_VERSION}")
        tasks = self._pq.read_table(self.root / "meta" / "tasks.parquet")
        order = sorted(
            zip(tasks.column("task_index").to_pylist(), tasks.column(1).to_pylist(), strict=True)
        )
        self._tasks = [task for _, task in order]
        self._repair(int(info.get("total_episodes", 0)))

    def _repair(self, listed: int) -> None:
        """Keep the episodes whose data and metadata files are both there, from 0 on.

        A crash between an episode's two renames leaves a data file without its
        metadata (removed: LeRobot would read its frames), and one after them but before
        ``info.json`` an episode ``info.json`` does not count yet (kept: it is whole);
        the metadata is then rewritten to match.
        """
        episodes = {
            path: self._pq.read_table(path).to_pylist()[0]
            for path in (self.root / "meta" / "episodes").glob("*/*.parquet")
        }
        data = set((self.root / "data").glob("*/*.parquet"))
        rows = []
        for index in range(len(episodes)):  # contiguous: stop at the first gap
            chunk, file = divmod(index, CHUNKS_SIZE)
            meta = self.root / EPISODES_PATH.format(chunk_index=chunk, file_index=file)
            frames = self.root / DATA_PATH.format(chunk_index=chunk, file_index=file)
            if meta not in episodes or frames not in data:
                break
            rows.append(episodes[meta])
        keep = {
            self.root / pattern.format(chunk_index=c, file_index=f)
            for c, f in (divmod(i, CHUNKS_SIZE) for i in range(len(rows)))
            for pattern in (DATA_PATH, EPISODES_PATH)
        }
        try:
            for path in [*episodes, *data]:
                if path not in keep:
                    path.unlink()
        except OSError as exc:
            raise DatasetError(f"cannot repair {self.root}: {exc.strerror}") from None
        self._episodes = rows
        if len(rows) != listed and rows:
            self._write_meta()

    # -- recording -----------------------------------------------------------------

    def begin(self, task: str) -> int:
        """Start an episode of ``task``; returns its index."""
        if task not in self._tasks:
            self._tasks.append(task)
        self._current = _Episode(len(self._episodes), self._tasks.index(task))
        return self._current.index

    def add(self, state: Sequence[float], action: Sequence[float]) -> None:
        """Add one frame to the episode begun."""
        if self._current is None:
            raise DatasetError("no episode begun")
        self._current.frames.append((list(state), list(action)))

    @property
    def frames(self) -> int:
        """Frames of the episode being recorded."""
        return 0 if self._current is None else len(self._current.frames)

    def discard(self) -> None:
        """Drop the episode being recorded (re-record it)."""
        self._current = None

    def end(self) -> int:
        """Write the episode begun (nothing if it has no frame); returns its frame count."""
        episode, self._current = self._current, None
        if episode is None or not episode.frames:
            return 0
        pa = self._pa
        n = len(episode.frames)
        first = self.total_frames
        state = np.array([f[0] for f in episode.frames], dtype=np.float32)
        action = np.array([f[1] for f in episode.frames], dtype=np.float32)
        frame_index = np.arange(n, dtype=np.int64)
        timestamp = (frame_index / self.fps).astype(np.float32)
        columns: dict[str, NDArray[Any]] = {
            "observation.state": state,
            "action": action,
            "timestamp": timestamp,
            "frame_index": frame_index,
            "episode_index": np.full(n, episode.index, dtype=np.int64),
            "index": np.arange(first, first + n, dtype=np.int64),
            "task_index": np.full(n, episode.task_index, dtype=np.int64),
        }
        dims = len(self.names)
        table = pa.table(
            {
                name: (
                    pa.FixedSizeListArray.from_arrays(pa.array(v.reshape(-1)), dims)
                    if v.ndim == 2
                    else pa.array(v)
                )
                for name, v in columns.items()
            }
        )
        chunk, file = divmod(episode.index, CHUNKS_SIZE)
        row: dict[str, Any] = {
            "episode_index": episode.index,
            "tasks": [self._tasks[episode.task_index]],
            "length": n,
            "data/chunk_index": chunk,
            "data/file_index": file,
            "dataset_from_index": first,
            "dataset_to_index": first + n,
        }
        stats = {
            name: _stats(v.reshape(n, -1) if v.ndim == 1 else v) for name, v in columns.items()
        }
        for name, feature_stats in stats.items():
            for key, value in feature_stats.items():
                row[f"stats/{name}/{key}"] = np.asarray(value).tolist()
        row["meta/episodes/chunk_index"] = chunk
        row["meta/episodes/file_index"] = file
        data_path = self.root / DATA_PATH.format(chunk_index=chunk, file_index=file)
        episodes_path = self.root / EPISODES_PATH.format(chunk_index=chunk, file_index=file)
        self._write_parquet(table, data_path)
        self._write_parquet(pa.Table.from_pylist([row]), episodes_path)
        self._episodes.append(row)
        self._write_meta()
        return n

    # -- files -----------------------------------------------------------------------

    def _write_parquet(self, table: Any, path: Path) -> None:
        tmp = path.with_name(path.name + ".tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._pq.write_table(table, tmp)
            _sync(tmp)
            os.replace(tmp, path)
        except OSError as exc:
            raise DatasetError(f"cannot write {path}: {exc.strerror}") from None

    def _write_text(self, text: str, path: Path) -> None:
        tmp = path.with_name(path.name + ".tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(text)
            _sync(tmp)
            os.replace(tmp, path)
        except OSError as exc:
            raise DatasetError(f"cannot write {path}: {exc.strerror}") from None

    def _write_meta(self) -> None:
        pa = self._pa
        tasks = pa.table(
            {
                "task_index": pa.array(range(len(self._tasks)), pa.int64()),
                "__index_level_0__": pa.array(self._tasks, pa.string()),
            }
        )
        # pandas' metadata: LeRobot reads the task strings as the frame's index
        pandas = {
            "index_columns": ["__index_level_0__"],
            "column_indexes": [],
            "columns": [
                {"name": "task_index", "field_name": "task_index", "pandas_type": "int64",
                 "numpy_type": "int64", "metadata": None},
                {"name": None, "field_name": "__index_level_0__", "pandas_type": "unicode",
                 "numpy_type": "object", "metadata": None},
            ],
            "attributes": {},
            "creator": {"library": "hilbot", "version": "1"},
            "pandas_version": "2.0.0",
        }  # fmt: skip
        tasks = tasks.replace_schema_metadata({"pandas": json.dumps(pandas)})
        self._write_parquet(tasks, self.root / "meta" / "tasks.parquet")
        names = [*self.features]
        stats = {
            name: _plain(
                _merge(
                    [
                        {
                            k.rsplit("/", 1)[1]: np.asarray(v)
                            for k, v in row.items()
                            if k.startswith(f"stats/{name}/")
                        }
                        for row in self._episodes
                    ]
                )
            )
            for name in names
        }
        self._write_text(json.dumps(stats, indent=4), self.root / "meta" / "stats.json")
        info = {
            "codebase_version": CODEBASE_VERSION,
            "robot_type": self.robot_type,
            "total_episodes": self.total_episodes,
            "total_frames": self.total_frames,
            "total_tasks": len(self._tasks),
            "chunks_size": CHUNKS_SIZE,
            "data_files_size_in_mb": 100,
            "video_files_size_in_mb": 200,
            "fps": self.fps,
            "splits": {"train": f"0:{self.total_episodes}"},
            "data_path": DATA_PATH,
            "video_path": None,
            "features": self.features,
        }
        self._write_text(json.dumps(info, indent=4), self.root / "meta" / "info.json")


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
