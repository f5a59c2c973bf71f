"""CycleDecoder gives the readings ServoUnits gives, for every model and read set, bit for bit."""

import math
import random

import pytest

from hilbot.hal.dynamixel import tables
from hilbot.hal.dynamixel.layout import BusLayout
from hilbot.hal.dynamixel.timing import ReadSet
from hilbot.hal.mapping import BusSpec, ServoSpec


@pytest.mark.parametrize("read", list(ReadSet), ids=[r.value for r in ReadSet])
@pytest.mark.parametrize("name", sorted(tables.MODELS))
@pytest.mark.parametrize(("offset", "direction", "gear"), [(0.0, 1, 1.0), (0.3, -1, 2.5)])
def test_the_struct_decoder_matches_the_register_decoder(name, offset, direction, gear, read):
    protocol = tables.model(name).protocol
    spec = ServoSpec(7, name, "j", offset=offset, direction=direction, gear_ratio=gear)
    (decoder,) = BusLayout(BusSpec("unused", protocol=protocol), [spec], read).decoders
    slot, units = decoder.slot, decoder.slot.units
    assert (slot.velocity is not None) == read.velocity
    assert (slot.effort is not None) == read.effort
    rng = random.Random(name)
    for _ in range(100):
        data = bytes(rng.randrange(256) for _ in range(slot.length))
        p, v, e = decoder.decode(data)
        assert p == units.position(slot.position.decode(data))
        if slot.velocity is None:
            assert math.isnan(v)
        else:
            assert v == units.velocity(slot.velocity.decode(data))
        if slot.effort is None:
            assert math.isnan(e)
        else:
            assert e == units.effort(slot.effort.decode(data))


@pytest.mark.parametrize(
    ("name", "read", "span"),
    [
        ("XM430-W350", ReadSet.POSITION, (132, 4)),
        ("XM430-W350", ReadSet.POSITION_VELOCITY, (128, 8)),
        ("XM430-W350", ReadSet.FULL, (126, 10)),
        ("XL430-W250", ReadSet.FULL, (126, 10)),
        ("AX-12A", ReadSet.POSITION, (36, 2)),
        ("AX-12A", ReadSet.POSITION_VELOCITY, (36, 4)),
        ("AX-12A", ReadSet.FULL, (36, 6)),
        ("MX-64", ReadSet.FULL, (36, 6)),
    ],
)
def test_each_read_set_reads_one_span_of_the_e_manual_addresses(name, read, span):
    protocol = tables.model(name).protocol
    layout = BusLayout(BusSpec("unused", protocol=protocol), [ServoSpec(1, name, "j")], read)
    assert layout.reads() == [(1, *span)]


def test_the_default_read_set_is_position_on_protocol_1_and_everything_on_2():
    p1 = BusLayout(BusSpec("unused", protocol=1), [ServoSpec(1, "AX-12A", "j")])
    p2 = BusLayout(BusSpec("unused", protocol=2), [ServoSpec(1, "XM430-W350", "j")])
    assert (p1.read_set, p1.reads()) == (ReadSet.POSITION, [(1, 36, 2)])
    assert (p2.read_set, p2.reads()) == (ReadSet.FULL, [(1, 126, 10)])


def test_an_unknown_read_set_is_a_config_error_listing_the_valid_ones():
    from hilbot.hal.errors import ConfigError

    with pytest.raises(ConfigError, match="position\\+velocity") as info:
        BusLayout(BusSpec("unused"), [ServoSpec(1, "XM430-W350", "j")], "positions")
    assert info.value.field == "read"
