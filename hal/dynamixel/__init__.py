"""Dynamixel servos on dynamixel-sdk and pyserial: protocol codec, control tables, backend."""
