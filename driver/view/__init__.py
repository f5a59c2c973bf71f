"""The live 3D view in the browser (viser): run, bench and replay.

Needs the ``view`` extra; nothing here imports viser until a view is opened.
"""

from hilbot.driver.view.live import LiveView, start_view
from hilbot.driver.view.scene import ChainView, Frame, RobotScene
from hilbot.driver.view.server import ViewError

__all__ = ["ChainView", "Frame", "LiveView", "RobotScene", "ViewError", "start_view"]
