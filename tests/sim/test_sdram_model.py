"""The SDRAM model on hand-written command sequences: data in and out at the right edges,
and every timing rule it enforces raising ``SdramViolation`` with the parameter, the bank
and the cycle."""

import dataclasses

import pytest

from qloom.errors import QloomError
from qloom.hw.sdram import ULX3S_SDRAM, Command, SdramBusSignature, mode_register
from qloom.sim.sdram_model import SdramModel, SdramViolation

# 133 MHz: tRCD = tRP = 3, tRAS 6, tRC = tRFC = 9, tRRD = tWR = tMRD = 2, CL 3,
# tREFI 1037; the power-up pause cut to 10 cycles
CYCLES = dataclasses.replace(ULX3S_SDRAM.cycles(133), power_up=10)
GEOMETRY = ULX3S_SDRAM.geometry
ALL = 1 << 10
ACT, READ, WRITE, PRE, REF, MODE = (Command.ACTIVATE, Command.READ, Command.WRITE,
                                    Command.PRECHARGE, Command.REFRESH, Command.MODE)


def model(**changes):
    return SdramModel(SdramBusSignature(GEOMETRY).create(), geometry=GEOMETRY,
                      cycles=dataclasses.replace(CYCLES, **changes))


def drive(m, events, until=None):
    """Edges 1 .. ``until`` (default: the last event); ``events`` maps an edge to
    (command, bank, address) or (command, bank, address, dq_oe, dq_o)."""
    until = max(events) if until is None else until
    for cycle in range(m.cycle + 1, until + 1):
        ev = events.get(cycle)
        if ev is None:
            m.edge(cycle, 1, 0, 0, 0, 0, 0, 0, 0, 0)
        else:
            cmd, ba, a, *dq = ev
            oe, word = dq if dq else (0, 0)
            m.edge(cycle, 1, 1, cmd >> 2 & 1, cmd >> 1 & 1, cmd & 1, ba, a, oe, word)
        m.cycle = cycle


def init(m, cl=3, refreshes=8):
    """PRECHARGE ALL at 11, REFRESH at 14 + 9k, MODE 9 cycles after the last: returns the
    first edge any command may come (tMRD after MODE)."""
    events = {11: (PRE, 0, ALL)}
    for k in range(refreshes):
        events[14 + 9 * k] = (REF, 0, 0)
    mode_at = 14 + 9 * refreshes
    events[mode_at] = (MODE, 0, mode_register(8, cl))
    drive(m, events)
    return mode_at + 2


def test_write_then_read_returns_the_burst_after_cas_latency():
    m = model()
    t = init(m)
    assert m.initialized and (m.cas_latency, m.burst_length) == (3, 8)
    words = [0x1111 * k for k in range(8)]
    events = {t: (ACT, 2, 5)}
    for k in range(8):      # WRITE at t+3 with its first word, then one word an edge
        events[t + 3 + k] = (WRITE, 2, 8) + (1, words[k]) if k == 0 else (0, 0, 0, 1, words[k])
    events[t + 11] = (READ, 2, 12)          # starts mid-burst: wraps within the 8 words
    drive(m, events)
    assert [m.peek(2, 5, 8 + k) for k in range(8)] == words
    assert m.driven(t + 11 + 2) is None
    got = [m.driven(t + 11 + 3 + k) for k in range(8)]
    assert got == words[4:] + words[:4]
    assert m.driven(t + 11 + 3 + 8) is None


def write_burst(at, bank, column, words=(0,) * 8):
    events = {at: (WRITE, bank, column, 1, words[0])}
    events.update({at + k: (Command.NOP, 0, 0, 1, words[k]) for k in range(1, 8)})
    return events


def sequence(parameter, t, d):
    """(events, bank, cycle of the violation): a sequence that breaks ``parameter`` by one
    cycle when ``d`` is 0, and keeps it exactly when ``d`` is 1 (its last command moved)."""
    if parameter == "tRCD":
        return {t: (ACT, 0, 1), t + 2 + d: (READ, 0, 0)}, 0, t + 2
    if parameter == "tRP":
        return {t: (ACT, 0, 1), t + 6: (PRE, 0, 0), t + 8 + d: (ACT, 0, 2)}, 0, t + 8
    if parameter == "tRAS":
        return {t: (ACT, 1, 1), t + 5 + d: (PRE, 1, 0)}, 1, t + 5
    if parameter == "tRRD":
        return {t: (ACT, 0, 1), t + 1 + d: (ACT, 3, 1)}, 3, t + 1
    if parameter == "tRFC":
        return {t: (REF, 0, 0), t + 8 + d: (REF, 0, 0)}, None, t + 8
    if parameter == "tMRD":
        return {t - 1 + d: (ACT, 0, 1)}, None, t - 1
    if parameter == "tWR":      # last word at t + 10, PRECHARGE tWR = 2 later
        return {t: (ACT, 2, 1), **write_burst(t + 3, 2, 0), t + 11 + d: (PRE, 2, 0)}, 2, t + 11
    if parameter == "burst":    # the second READ cuts the first's 8 words short
        return {t: (ACT, 0, 1), t + 3: (READ, 0, 0), t + 10 + d: (READ, 0, 8)}, 0, t + 10
    if parameter == "read burst cut by PRECHARGE":
        return {t: (ACT, 0, 1), t + 3: (READ, 0, 0), t + 10 + d: (PRE, 0, 0)}, 0, t + 10
    if parameter == "DQ contention":   # read words at t+6 .. t+13, held into t+14
        return {t: (ACT, 0, 1), t + 3: (READ, 0, 0), **write_burst(t + 14 + d, 0, 8)}, \
            None, t + 14
    raise AssertionError(parameter)


TIMED = ["tRCD", "tRP", "tRAS", "tRRD", "tRFC", "tMRD", "tWR", "burst",
         "read burst cut by PRECHARGE", "DQ contention"]


@pytest.mark.parametrize("parameter", TIMED)
def test_each_violation_names_parameter_bank_and_cycle(parameter):
    m = model()
    t = init(m)
    events, bank, cycle = sequence(parameter, t, 0)
    with pytest.raises(SdramViolation) as info:
        drive(m, events)
    expected = "burst" if parameter.startswith("read burst") else parameter
    assert (info.value.parameter, info.value.bank, info.value.cycle) == (expected, bank, cycle)


@pytest.mark.parametrize("parameter", TIMED)
def test_one_cycle_later_is_legal(parameter):
    m = model()
    t = init(m)
    events, _, _ = sequence(parameter, t, 1)
    drive(m, events, until=max(events) + 20)


def test_trc_and_tras_max():
    # tRAS + tRP cover tRC on this chip; a chip with a longer tRC shows the check
    m = model(t_rc=12)
    t = init(m)
    with pytest.raises(SdramViolation) as info:
        drive(m, {t: (ACT, 1, 1), t + 6: (PRE, 1, 0), t + 11: (ACT, 1, 2)})
    assert (info.value.parameter, info.value.bank, info.value.cycle) == ("tRC", 1, t + 11)
    m = model(t_ras_max=20)
    t = init(m)
    with pytest.raises(SdramViolation) as info:
        drive(m, {t: (ACT, 3, 1), t + 21: (PRE, 3, 0)})
    assert (info.value.parameter, info.value.bank) == ("tRAS max", 3)


def test_refresh_interval():
    m = model()
    t = init(m)
    last_refresh = t - 2 - 9
    drive(m, {}, until=last_refresh + CYCLES.t_refi)     # exactly t_refi: still fine
    with pytest.raises(SdramViolation) as info:
        drive(m, {}, until=last_refresh + CYCLES.t_refi + 1)
    assert (info.value.parameter, info.value.bank, info.value.cycle) == \
        ("refresh interval", None, last_refresh + CYCLES.t_refi + 1)
    assert str(info.value) == (f"SDRAM refresh interval violated on the chip at cycle "
                               f"{last_refresh + 1038}: no REFRESH for 1038 cycles, the chip "
                               f"needs one every 1037")
    assert isinstance(info.value, QloomError)


def test_cas_latency_below_the_chips():
    m = model()
    with pytest.raises(SdramViolation, match=r"CAS latency violated on the chip at cycle 86: "
                                             r"CL 2 programmed, the chip needs 3 at 133 MHz"):
        init(m, cl=2)


@pytest.mark.parametrize("events,parameter,detail", [
    ({5: (PRE, 0, ALL)}, "power-up", "PRECHARGE before the 10-cycle power-up pause ended"),
    ({11: (ACT, 0, 1)}, "initialization", "ACTIVATE before the mode register was set"),
    ({11: (REF, 0, 0)}, "initialization", "REFRESH before the first PRECHARGE ALL"),
    ({11: (PRE, 0, ALL), 14: (REF, 0, 0), 23: (MODE, 0, 0x33)}, "initialization",
     "MODE REGISTER SET after 1 REFRESHes, the chip needs 8"),
])
def test_initialization_order(events, parameter, detail):
    m = model()
    with pytest.raises(SdramViolation) as info:
        drive(m, events)
    assert info.value.parameter == parameter and info.value.detail == detail


def test_bank_state_and_write_data():
    m = model()
    t = init(m)
    with pytest.raises(SdramViolation, match=r"bank state violated on bank 1 at cycle \d+: "
                                             r"READ to a closed bank"):
        drive(m, {t: (READ, 1, 0)})
    m = model()
    t = init(m)
    burst = write_burst(t + 3, 0, 0)
    burst[t + 5] = (Command.NOP, 0, 0, 0, 0)
    with pytest.raises(SdramViolation) as info:
        drive(m, {t: (ACT, 0, 1), **burst})
    assert (info.value.parameter, info.value.cycle) == ("write data", t + 5)
    m = model()
    t = init(m)
    with pytest.raises(SdramViolation, match=r"bank state violated on bank 0 .*REFRESH with "
                                             r"row 1 open"):
        drive(m, {t: (ACT, 0, 1), t + 20: (REF, 0, 0)})
