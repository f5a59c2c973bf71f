"""The ``calibration`` section of a robot config."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

Finite = Annotated[float, Field(allow_inf_nan=False)]

#: The middle pose when a config documents none: the URDF's zero pose.
DEFAULT_POSE_TEXT = "every joint at the zero of its URDF (the pose the URDF is drawn in)"


class CalibrationSettings(BaseModel):
    """How a robot is calibrated, and whether it must be before it runs.

    ``calibration: required`` is short for ``calibration: {required: true}``.

    Attributes:
        required: refuse to run on a bus (virtual or real) without a calibration file;
            the message names the ``hilbot calibrate`` command to run.
        middle_pose: the joint positions [rad or m] of the documented middle pose
            (joints not named: 0); homing offsets are set there.
        middle_pose_text: how to put the arm in the middle pose, shown by the prompt.
        stale_margin: at start-up a joint reading outside its calibrated range by more
            than this [rad or m] means the calibration no longer matches the arm.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    required: bool = False
    middle_pose: dict[str, Finite] = Field(default_factory=dict)
    middle_pose_text: str = DEFAULT_POSE_TEXT
    stale_margin: Annotated[float, Field(gt=0.0, le=1.0, allow_inf_nan=False)] = 0.15

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, value: Any) -> Any:
        if value == "required":
            return {"required": True}
        if value == "optional":
            return {}
        return value
