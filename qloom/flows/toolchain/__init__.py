"""The tools a design goes through after compiling: Yosys and nextpnr for the boards (with qloom's ECP5 netlist passes), and the ASIC standard-cell flow."""
