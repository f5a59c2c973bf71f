"""hilbot: a hardware-in-the-loop robot driver framework.

Subpackages: ``hilbot.kinematics`` (robot models, FK, IK), ``hilbot.hal``
(backends and the Dynamixel driver), ``hilbot.sim`` (servo model, simulated
backend, virtual Dynamixel bus), ``hilbot.driver`` (runtime, safety, teleop,
command line) and ``hilbot.configs`` (shipped robot configs).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("hilbot")
except PackageNotFoundError:  # pragma: no cover - running from an uninstalled tree
    __version__ = "0.0.0"

__all__ = ["__version__"]
