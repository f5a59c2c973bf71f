"""LeRobotDataset v3 recording: hilbot writes the files itself (the ``dataset`` extra, pyarrow)."""
