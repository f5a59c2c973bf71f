"""The serial-bus engine every servo family runs on.

``hilbot.hal.bus.worker``: the one bus thread (goal writes slotted behind cycle reads,
pipelining, one set of cancellation rules); ``hilbot.hal.bus.port``: the pyserial port
with wire-clock deadlines; ``hilbot.hal.bus.backend``: the backend lifecycle a family's
backend builds on. A family is a profile on top (``hilbot.hal.family``).
"""
