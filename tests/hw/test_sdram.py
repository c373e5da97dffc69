# amaranth: UnusedElaboratable=no
"""The SDRAM controller against the SDRAM model (Amaranth pysim): random reads and writes
checked against a dict, refresh under sustained load, back-to-back bursts across banks, and
controllers built with broken timing that the model must catch."""

import dataclasses
import random

import pytest

from qloom.hw.sdram import ULX3S_SDRAM, SdramController, sequential_read_efficiency
from qloom.sim.sdram_model import SdramViolation
from qloom.sim.sdram_run import Read, Write, run_sdram

GEOMETRY = ULX3S_SDRAM.geometry


def chip(mhz=133.0):
    """The ULX3S chip's timing at ``mhz`` with the 200 us power-up pause cut to 40 cycles
    (26,600 cycles of NOPs would dominate every run; the sequence is the same)."""
    return dataclasses.replace(ULX3S_SDRAM.cycles(mhz), power_up=40)


def controller(cycles=None, **kw):
    return SdramController(geometry=GEOMETRY, cycles=cycles or chip(), **kw)


def burst_of(dut, bank, row, column_burst):
    per_row = GEOMETRY.columns // dut.burst_length
    return (row * GEOMETRY.banks + bank) * per_row + column_burst


def random_requests(dut, rng, n, pool_size=12):
    """Writes to every burst of a pool (same row, other rows of a bank, other banks, the
    last row and column), then ``n`` random reads and writes of the pool; and the data the
    reads must return, from a dict."""
    per_row = GEOMETRY.columns // dut.burst_length
    spots = [(b, r, c) for b in range(GEOMETRY.banks) for r in (0, 1, GEOMETRY.rows - 1)
             for c in (0, 1, per_row - 1)]
    pool = [burst_of(dut, *s) for s in rng.sample(spots, pool_size)]
    for burst in pool:
        assert dut.locate(burst) in {(b, r, c * dut.burst_length) for b, r, c in spots}
    bl = dut.burst_length

    def write(burst):
        return Write(burst, tuple(rng.randrange(1 << GEOMETRY.data_bits) for _ in range(bl)))

    requests = [write(b) for b in pool]
    for _ in range(n):
        burst = rng.choice(pool)
        requests.append(write(burst) if rng.random() < 0.4 else Read(burst))
    memory, expected = {}, []
    for req in requests:
        if isinstance(req, Write):
            memory[req.burst] = list(req.words)
        else:
            expected.append(memory[req.burst])
    return requests, expected


@pytest.mark.parametrize("mhz,bl,stall", [(133, 8, 0.0), (133, 8, 0.3), (100, 4, 0.3),
                                          (143, 2, 0.5), (133, 1, 0.2)])
def test_random_reads_and_writes_match_a_dict(mhz, bl, stall):
    dut = controller(chip(mhz), burst_length=bl)
    rng = random.Random(mhz * 10 + bl)
    requests, expected = random_requests(dut, rng, 40)
    run = run_sdram(dut, requests, cmd_stall=stall, w_stall=stall, r_stall=stall, seed=bl)
    assert run.reads == expected
    assert run.model.commands["PRECHARGE"] > 1       # rows were changed, not only opened


def test_refresh_under_sustained_load():
    cycles = chip()
    dut = controller(cycles)
    rng = random.Random(5)
    # one row and a half of bursts written, then read back to back, over and over: five
    # refresh intervals and more of reads without a gap in the requests
    bursts = list(range(96))
    writes = [Write(b, tuple(rng.randrange(1 << 16) for _ in range(8))) for b in bursts]
    reads = [Read(b) for _ in range(7) for b in bursts]
    run = run_sdram(dut, writes + reads)
    data = {w.burst: list(w.words) for w in writes}
    assert run.reads == [data[r.burst] for r in reads]
    span = run.read_cycles[-1] - run.read_cycles[0] + 1
    assert span > 5 * cycles.t_refi
    refreshes = run.model.commands["REFRESH"] - cycles.init_refreshes
    assert refreshes >= span // cycles.t_refi
    assert run.model.max_refresh_gap <= cycles.t_refi        # the model enforces it too
    # refreshes cost a few percent of the reads' cycles, as the planner's estimate says
    measured = len(run.read_cycles) / span
    assert 0.95 < measured < 1
    assert measured == pytest.approx(sequential_read_efficiency(cycles, 8, GEOMETRY.columns),
                                     abs=0.005)


def test_back_to_back_bursts_across_banks():
    dut = controller()
    rng = random.Random(7)
    spots = [burst_of(dut, bank, row, 3) for bank, row in enumerate((5, 900, 17, 8000))]
    writes = [Write(b, tuple(rng.randrange(1 << 16) for _ in range(8))) for b in spots]
    reads = [Read(spots[k % 4]) for k in range(24)]
    run = run_sdram(dut, writes + reads)
    data = {w.burst: list(w.words) for w in writes}
    assert run.reads == [data[r.burst] for r in reads]
    # every bank keeps its row open: one ACTIVATE each, and the reads go without a gap
    assert run.model.commands["ACTIVATE"] == 4
    assert run.read_cycles[-1] - run.read_cycles[0] == 24 * 8 - 1


def test_read_data_wait_for_a_slow_reader():
    # the chip cannot hold data back: READs wait for room in the read FIFO
    dut = controller(read_fifo_depth=16)
    rng = random.Random(11)
    requests, expected = random_requests(dut, rng, 30)
    run = run_sdram(dut, requests, r_stall=0.9)
    assert run.reads == expected


def test_a_read_path_delay_not_in_the_board_gives_wrong_data():
    # the controller expecting one more register on dq than the model has reads each word
    # one edge late: the model's data are there only at CL
    dut = controller(read_delay=1)
    rng = random.Random(3)
    requests, expected = random_requests(dut, rng, 10)
    run = run_sdram(dut, requests)
    assert run.reads != expected


BROKEN = [
    # (what the controller is told, burst length, what the model must catch)
    ({"t_rcd": 1}, 8, "tRCD"),
    ({"t_rp": 1}, 8, "tRP"),
    ({"t_ras": 1}, 1, "tRAS"),      # a burst of 8 outlasts tRAS by itself
    ({"t_rfc": 2}, 8, "tRFC"),
    ({"t_wr": 1}, 8, "tWR"),
    ({"t_mrd": 1}, 8, "tMRD"),
    ({"cas_latency": 2}, 8, "CAS latency"),
    ({"t_refi": 100_000}, 8, "refresh interval"),    # refresh as good as disabled
]


@pytest.mark.parametrize("change,bl,parameter", BROKEN, ids=[p for _, _, p in BROKEN])
def test_broken_timing_is_caught(change, bl, parameter):
    truth = chip()
    dut = controller(dataclasses.replace(truth, **change), burst_length=bl)
    rng = random.Random(1)
    # row changes in one bank after writes and reads, then enough reads to need a refresh
    requests, _ = random_requests(dut, rng, 20, pool_size=4)
    requests += [Read(requests[0].burst)] * (2 * truth.t_refi // bl)
    with pytest.raises(SdramViolation) as info:
        run_sdram(dut, requests, chip=truth)
    assert info.value.parameter == parameter
    # the same workload with the chip's own timing is clean
    if parameter in ("tRCD", "refresh interval"):
        good = controller(truth, burst_length=bl)
        run_sdram(good, requests, chip=truth)


def test_controller_rejects_bad_parameters():
    with pytest.raises(ValueError, match=r"^Burst length must be one of 1, 2, 4, 8, not 16$"):
        controller(burst_length=16)
    with pytest.raises(ValueError, match=r"^Read FIFO depth must be at least 16 words, not 8$"):
        controller(read_fifo_depth=8)
    with pytest.raises(TypeError, match=r"^Read delay must be a non-negative integer, "
                                        r"not -1$"):
        controller(read_delay=-1)
    with pytest.raises(TypeError, match=r"^SDRAM timing must be an SdramCycles, not 133$"):
        SdramController(geometry=GEOMETRY, cycles=133)
    with pytest.raises(ValueError, match=r"^Refresh interval of 30 cycles leaves no time"):
        controller(dataclasses.replace(chip(), t_refi=30))


def test_address_map_row_bank_column():
    dut = controller()
    assert dut.locate(0) == (0, 0, 0)
    assert dut.locate(1) == (0, 0, 8)
    assert dut.locate(64) == (1, 0, 0)          # a row's 64 bursts, then the next bank
    assert dut.locate(256) == (0, 1, 0)
    assert dut.locate(GEOMETRY.words // 8 - 1) == (3, GEOMETRY.rows - 1, GEOMETRY.columns - 8)


@pytest.mark.slow
def test_controller_meets_133_mhz_on_the_ulx3s(tmp_path):
    # placed alone on the LFE5U-85F (2026-12-07: 576 LUT, 297 FF, 141.8 MHz at a 133 MHz
    # constraint; 140.1 MHz against 143, the chip's fastest clock)
    from qloom.flows.toolchain.synth import synthesize
    dut = controller(ULX3S_SDRAM.cycles(133))
    r = synthesize(dut, family="ecp5", device="LFE5U-85F", package="BG381",
                   build_dir=tmp_path, clock_mhz=133, pnr=True)
    assert r.timing_met, f"{r.fmax_mhz} MHz"
    assert r.bram == 0 and r.dsp == 0 and r.lut < 1000
