"""A multiplier on an ECP5 ``MULT18X18D`` DSP block with its own input and output registers.

Yosys maps ``a * b`` onto ``MULT18X18D`` with every register bypassed and has no pass that
moves neighbouring flip-flops into the block (it has one for iCE40's ``SB_MAC16``, none for
ECP5). The fabric registers around a bypassed block are then placed wherever the logic
is, and on a design using most of the ECP5-85F's DSP blocks the routes into and out of
them took 15 of a 19 ns critical path (the jet tagger). ``Ecp5Multiplier`` instantiates
the block with its A/B input registers and its output register on, enabled by ``ce``: two
cycles from operands to product (the matrix-vector unit feeds it from its operand
register, adds a stage to its other lanes to match, and registers the products once
more in the fabric before its adder tree).

Simulators do not know the primitive: ``MULT18X18D_MODEL`` is a Verilog model of the
configuration instantiated here, which ``qloom simulate`` and the component checks add
when a design instantiates the block (never the board build: Yosys has its own).
"""

from __future__ import annotations

from amaranth.hdl import ClockSignal, Const, Instance, Module, Shape, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .types import shape_of

__all__ = ["Ecp5Multiplier", "MULT18X18D_MODEL", "check_dsp_primitive", "fits_dsp",
           "simulation_models"]

_WIDTH = 18


def fits_dsp(shape: Shape) -> bool:
    """Whether a value of ``shape`` is exact as an 18-bit signed block operand."""
    return shape.width <= (_WIDTH if shape.signed else _WIDTH - 1)


def check_dsp_primitive(primitive, operands=()) -> None:
    """A template's ``dsp_primitive`` argument: None or "ecp5"; with "ecp5", each of
    ``operands`` (``(label, DataType)`` pairs) must fit a block (``fits_dsp``)."""
    if primitive not in (None, "ecp5"):
        raise ValueError(f"DSP primitive must be None or 'ecp5', not {primitive!r}")
    if primitive:
        for label, dtype in operands:
            if not fits_dsp(shape_of(dtype)):
                raise ValueError(f"{label} {dtype} does not fit an ECP5 MULT18X18D "
                                 f"(signed up to 18 bits, unsigned up to 17)")


class Ecp5Multiplier(wiring.Component):
    """``p = a * b``, two ``ce``-enabled cycles after ``a`` and ``b``, on one MULT18X18D.

    Operands are signed up to 18 bits or unsigned up to 17 bits (both go in as 18-bit
    signed numbers); ``p`` is exactly as wide as the product of the two shapes."""

    def __init__(self, a_shape: Shape, b_shape: Shape):
        a_shape, b_shape = Shape.cast(a_shape), Shape.cast(b_shape)
        for name, shape in (("A", a_shape), ("B", b_shape)):
            if not fits_dsp(shape):
                raise ValueError(f"Operand {name} of {shape} does not fit a MULT18X18D "
                                 f"(signed up to 18 bits, unsigned up to 17)")
        width = a_shape.width + b_shape.width
        p_shape = signed(width) if a_shape.signed or b_shape.signed else unsigned(width)
        super().__init__({"a": In(a_shape), "b": In(b_shape), "ce": In(1),
                          "p": Out(p_shape)})

    def elaborate(self, platform):
        m = Module()
        a, b = Signal(signed(_WIDTH)), Signal(signed(_WIDTH))
        product = Signal(signed(2 * _WIDTH))
        m.d.comb += [a.eq(self.a), b.eq(self.b), self.p.eq(product)]
        ports = {f"i_A{k}": a[k] for k in range(_WIDTH)}
        ports.update({f"i_B{k}": b[k] for k in range(_WIDTH)})
        ports.update({f"i_C{k}": Const(0) for k in range(_WIDTH)})
        ports.update({f"o_P{k}": product[k] for k in range(2 * _WIDTH)})
        m.submodules.block = Instance(
            "MULT18X18D",
            p_REG_INPUTA_CLK="CLK0", p_REG_INPUTB_CLK="CLK0", p_REG_INPUTC_CLK="NONE",
            p_REG_PIPELINE_CLK="NONE", p_REG_OUTPUT_CLK="CLK0", p_GSR="DISABLED",
            p_RESETMODE="SYNC",
            i_CLK0=ClockSignal("sync"), i_CE0=self.ce, i_RST0=Const(0),
            i_SIGNEDA=Const(1), i_SIGNEDB=Const(1), i_SOURCEA=Const(0), i_SOURCEB=Const(0),
            **ports)
        return m


def _ports(prefix: str, n: int) -> str:
    return ", ".join(f"{prefix}{k}" for k in reversed(range(n)))


# The configuration Ecp5Multiplier instantiates: A, B and output registers on CLK0 with
# CE0, signed 18 x 18 -> 36 bits (Lattice's manual, "ECP5 sysDSP Usage Guide").
MULT18X18D_MODEL = f"""\
// Simulation model of the Lattice ECP5 MULT18X18D configuration qloom instantiates
// (qloom.hw.dsp): optional A, B and output registers on CLK0 enabled by CE0, no reset.
module MULT18X18D (
    input {_ports("A", 18)},
    input {_ports("B", 18)},
    input {_ports("C", 18)},
    input SIGNEDA, SIGNEDB, SOURCEA, SOURCEB, CLK0, CE0, RST0,
    output {_ports("P", 36)}
);
    parameter REG_INPUTA_CLK = "NONE";
    parameter REG_INPUTB_CLK = "NONE";
    parameter REG_INPUTC_CLK = "NONE";
    parameter REG_PIPELINE_CLK = "NONE";
    parameter REG_OUTPUT_CLK = "NONE";
    parameter GSR = "ENABLED";
    parameter RESETMODE = "SYNC";
    wire [17:0] a = {{{_ports("A", 18)}}};
    wire [17:0] b = {{{_ports("B", 18)}}};
    reg [17:0] a_reg = 18'd0;
    reg [17:0] b_reg = 18'd0;
    reg [35:0] p_reg = 36'd0;
    wire [17:0] a_in = REG_INPUTA_CLK == "NONE" ? a : a_reg;
    wire [17:0] b_in = REG_INPUTB_CLK == "NONE" ? b : b_reg;
    wire signed [37:0] product = $signed({{SIGNEDA & a_in[17], a_in}}) *
                                 $signed({{SIGNEDB & b_in[17], b_in}});
    always @(posedge CLK0) begin
        if (CE0) begin
            a_reg <= a;
            b_reg <= b;
            p_reg <= product[35:0];
        end
    end
    assign {{{_ports("P", 36)}}} = REG_OUTPUT_CLK == "NONE" ? product[35:0] : p_reg;
endmodule
"""


def simulation_models(verilog: str) -> dict[str, str]:
    """File name -> Verilog of the vendor-primitive models ``verilog`` needs in simulation
    (this block's and the iCE40 SPRAM's, ``qloom.hw.spram``)."""
    from .spram import simulation_models as spram_models
    models = {"MULT18X18D.v": MULT18X18D_MODEL} if "MULT18X18D " in verilog else {}
    return {**models, **spram_models(verilog)}
