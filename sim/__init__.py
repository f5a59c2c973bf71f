"""Simulation: servo dynamics model, in-process SimBackend, virtual Dynamixel bus."""
