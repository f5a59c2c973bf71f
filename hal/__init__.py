"""Hardware abstraction layer: the Backend protocol, joint state, and the Dynamixel backend."""
