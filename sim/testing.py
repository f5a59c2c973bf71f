"""Test helpers, by their old name: ``running_virtual_bus`` lives in ``virtual_bus_runner``.

Kept so that tests and users importing ``hilbot.sim.testing`` keep working; new code
imports ``running_virtual_bus`` from ``hilbot.sim``. Nothing in the package imports
this module.
"""

from hilbot.sim.virtual_bus_runner import running_virtual_bus

__all__ = ["running_virtual_bus"]
