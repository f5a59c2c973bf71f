"""CycleDecoder gives the readings ServoUnits gives, for every model, bit for bit."""

import random

import pytest

from hilbot.hal.dynamixel import tables
from hilbot.hal.dynamixel.layout import BusLayout
from hilbot.hal.mapping import BusSpec, ServoSpec


@pytest.mark.parametrize("name", sorted(tables.MODELS))
@pytest.mark.parametrize(("offset", "direction", "gear"), [(0.0, 1, 1.0), (0.3, -1, 2.5)])
def test_the_struct_decoder_matches_the_register_decoder(name, offset, direction, gear):
    protocol = tables.model(name).protocol
    spec = ServoSpec(7, name, "j", offset=offset, direction=direction, gear_ratio=gear)
    (decoder,) = BusLayout(BusSpec("unused", protocol=protocol), [spec]).decoders
    slot, units = decoder.slot, decoder.slot.units
    rng = random.Random(name)
    for _ in range(100):
        data = bytes(rng.randrange(256) for _ in range(slot.length))
        expected = (
            units.position(slot.position.decode(data)),
            units.velocity(slot.velocity.decode(data)),
            units.effort(slot.effort.decode(data)),
            slot.temperature.decode(data) if slot.temperature is not None else None,
        )
        assert decoder.decode(data) == expected
