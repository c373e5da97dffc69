"""``qloom build OUT --target asic``: the accelerator core through an open standard-cell
flow (qflow's scripts around Yosys, graywolf, qrouter, magic and netgen, OpenSTA for
timing and power) to a DRC- and LVS-checked GDS, with a gate-level simulation of the
routed netlist checked frame by frame against the integer network. See docs/asic.md.
"""
