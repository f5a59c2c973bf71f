"""A network camera in LeRobot's ZMQ wire format, with a synthetic scene (no device).

    python zmq_camera_server.py PORT NAME WIDTH HEIGHT

Publishes, at 30 frames per second on ``tcp://127.0.0.1:PORT``, what LeRobot's own
``lerobot/cameras/zmq/image_server.py`` sends: a JSON string ``{"timestamps": {NAME: t},
"images": {NAME: <base64 JPEG>}}``. Each frame is a gray level that steps with the frame
count, so consecutive frames differ. Runs with LeRobot's python (zmq, cv2); prints
``serving`` once bound; stops on SIGTERM.
"""

from __future__ import annotations

import base64
import json
import sys
import time

import cv2
import numpy as np
import zmq


def main() -> None:
    port, name, width, height = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    context = zmq.Context()
    socket = context.socket(zmq.PUB)
    socket.setsockopt(zmq.LINGER, 0)
    socket.bind(f"tcp://127.0.0.1:{port}")
    print("serving", flush=True)
    count = 0
    while True:
        frame = np.full((height, width, 3), (count * 8) % 256, dtype=np.uint8)
        _, jpeg = cv2.imencode(".jpg", frame)
        message = {
            "timestamps": {name: time.time()},
            "images": {name: base64.b64encode(jpeg.tobytes()).decode()},
        }
        socket.send_string(json.dumps(message))
        count += 1
        time.sleep(1 / 30)


if __name__ == "__main__":
    main()
