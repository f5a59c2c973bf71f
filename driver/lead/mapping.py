"""Leader joint positions -> follower joint targets, by name, scale, offset and range."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from hilbot.driver.runtime.config import JointLead, LeadSettings, RobotConfig
from hilbot.driver.runtime.errors import ConfigError


@dataclass(frozen=True, slots=True)
class _Map:
    leader: str
    follower: str
    scale: float
    offset: float
    range: tuple[float, float] | None
    follower_range: tuple[float, float] | None

    def __call__(self, value: float) -> float:
        if self.range is None or self.follower_range is None:
            return self.offset + self.scale * value
        (lo, hi), (flo, fhi) = self.range, self.follower_range
        out = flo + (value - lo) / (hi - lo) * (fhi - flo)
        return min(max(out, min(flo, fhi)), max(flo, fhi))


class LeadMap:
    """The compiled mapping of a leader config onto a follower config.

    Raises:
        ConfigError: a ``lead.joints`` entry naming a joint the leader does not have, or
            a follower joint the follower does not have, or two leader joints on one.
    """

    def __init__(self, leader: RobotConfig, follower: RobotConfig) -> None:
        settings: LeadSettings = getattr(leader, "lead", None) or LeadSettings()
        unknown = sorted(set(settings.joints) - set(leader.joint_names))
        if unknown:
            raise ConfigError(None, ("lead", "joints"), f"the leader has no joints {unknown}")
        maps = []
        for joint in leader.joint_names:
            if joint in settings.joints and settings.joints[joint] is None:
                continue
            lead = settings.joints.get(joint) or JointLead()
            target = lead.to or joint
            if target not in follower.joint_names:
                raise ConfigError(
                    None,
                    ("lead", "joints", joint),
                    f"{follower.name} has no joint {target!r}; its joints: "
                    f"{', '.join(follower.joint_names)}",
                )
            maps.append(
                _Map(joint, target, lead.scale, lead.offset, lead.range, lead.follower_range)
            )
        targets = [m.follower for m in maps]
        twice = sorted({t for t in targets if targets.count(t) > 1})
        if twice:
            raise ConfigError(None, ("lead", "joints"), f"several leader joints drive {twice}")
        if not maps:
            raise ConfigError(None, ("lead", "joints"), "no leader joint drives the follower")
        self.maps = tuple(maps)
        self.hold = settings.hold
        if self.hold is not None and self.hold.joint not in leader.joint_names:
            raise ConfigError(
                None, ("lead", "hold", "joint"), f"the leader has no joint {self.hold.joint!r}"
            )

    @property
    def follower_joints(self) -> tuple[str, ...]:
        """The follower joints the leader drives."""
        return tuple(m.follower for m in self.maps)

    def __call__(self, leader: Mapping[str, float]) -> dict[str, float]:
        """Follower joint targets for the leader's joint positions."""
        return {m.follower: m(leader[m.leader]) for m in self.maps}
