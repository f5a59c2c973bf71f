"""The servo-family registry: what the rest of hilbot asks instead of branching on a name."""

import re
from pathlib import Path

import pytest

from hilbot.hal.dynamixel.backend import DynamixelBackend
from hilbot.hal.errors import ConfigError
from hilbot.hal.family import FAMILIES, family
from hilbot.hal.feetech.backend import FeetechBackend
from hilbot.hal.mapping import BusSpec, ServoSpec

ROOT = Path(__file__).resolve().parents[2]
#: A comparison of a family's name: what the registry replaces outside hal/.
BRANCH = re.compile(
    r"""(==|!=)\s*["'](dynamixel|feetech)["']|["'](dynamixel|feetech)["']\s*(==|!=)"""
)


def test_every_family_is_registered_by_its_config_name():
    assert set(FAMILIES) == {"dynamixel", "feetech"}
    for name, fam in FAMILIES.items():
        assert fam.name == name and family(name) is fam
    with pytest.raises(ValueError, match="unknown servo family 'herkulex'; known: dynamixel"):
        family("herkulex")


def test_what_each_family_answers():
    dxl, ft = family("dynamixel"), family("feetech")
    assert dxl.model("XL-320").model_number == 350
    assert ft.model("sts3215").name == "STS3215"
    assert dxl.knows("xm430-w350") and not ft.knows("XM430-W350")
    assert (dxl.describe(1), ft.describe(0)) == ("protocol 1.0", "Feetech")
    assert dxl.has_bus_watchdog and not ft.has_bus_watchdog
    assert (dxl.homing_sign, ft.homing_sign) == (1, -1)
    servo = ServoSpec(1, "STS3215", "a", torque_limit=0.5)
    assert ft.settings_given(servo) == ["torque_limit"] and dxl.settings_given(servo) == []
    with pytest.raises(ConfigError, match="is a Dynamixel setting"):
        ft.check_settings(ServoSpec(1, "STS3215", "a", mode="position"))
    dxl.check_settings(ServoSpec(1, "XM430-W350", "a", mode="position"))  # nothing to refuse
    bus = BusSpec("/dev/null", 1_000_000)
    servos = [ServoSpec(i, "XM430-W350", f"j{i}") for i in (1, 2)]
    assert dxl.max_cycle_rate(bus, servos) > ft.max_cycle_rate(
        BusSpec("/dev/null", 1_000_000, family="feetech"), [ServoSpec(1, "STS3215", "a")] * 4
    )


def test_the_backend_comes_from_the_family_with_the_options_it_takes():
    servos = [ServoSpec(1, "XM430-W350", "a")]
    arm = family("dynamixel").backend(BusSpec("/dev/null"), servos, read="position", retries=3)
    assert isinstance(arm, DynamixelBackend) and arm.pipeline == "auto"
    ft_servos = [ServoSpec(1, "STS3215", "a")]
    spec = BusSpec("/dev/null", family="feetech")
    # read and latency_ms are Dynamixel options: a Feetech bus leaves them out
    arm = family("feetech").backend(
        spec, ft_servos, read="position", latency_ms=1.0, pipeline="auto"
    )
    assert isinstance(arm, FeetechBackend) and arm.pipeline is False


def test_no_code_outside_hal_branches_on_a_family_name():
    found = []
    for top in ("driver", "sim", "kinematics", "configs", "src", "benchmarks"):
        for path in sorted((ROOT / top).rglob("*.py")):
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                code = line.split("#", 1)[0]
                if BRANCH.search(code):
                    found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "ask hilbot.hal.family instead:\n" + "\n".join(found)
