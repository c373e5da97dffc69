"""`--fold auto` that cannot fit says what does not fit, by how much, and where it goes."""

from qloom.flows.compile.cost import Resources
from qloom.flows.compile.engines.base import Fold
from qloom.flows.compile.graph import EngineGraph
from qloom.flows.compile.plan import Plan, shortfall


def _plan(**engines):
    """A plan with these estimates per engine name and no engines behind them (no skip
    buffers to name)."""
    return Plan(choice={k: Fold() for k in engines}, mapped=(),
                graph=EngineGraph.build((), {}), dsps={k: 0 for k in engines},
                cycles={k: 1 for k in engines}, resources=engines, how="auto")


def test_shortfall_names_each_resource_and_the_largest_engines():
    plan = _plan(conv_a=Resources(lut=4000, ff=100, bram=20),
                 conv_b=Resources(lut=1500, ff=50, bram=12), pool=Resources(lut=100))
    text = shortfall(plan, Resources(lut=5280, ff=10560, dsp=8, bram=30))
    assert text == ("LUT 5,600 against 5,280 (over by 320, 106% of it); BRAM 32 against 30 "
                    "(over by 2, 107% of it); the most LUT goes to conv_a 4,000, conv_b "
                    "1,500, pool 100 (every engine is already at its smallest folding)")


def test_shortfall_within_counts_blames_the_board_share():
    text = shortfall(_plan(a=Resources(lut=10)), Resources(lut=100, ff=100, dsp=1, bram=1))
    assert "within the budget" in text and "the total is not once" in text


def test_shortfall_probes_the_board_test_for_the_binding_resource():
    plan = _plan(a=Resources(lut=1600, ff=1300, bram=19))
    budget = Resources(lut=5280, ff=5280, dsp=8, bram=30)
    # the board adds 12 block RAMs for its host link
    text = shortfall(plan, budget, lambda need: need.bram + 12 <= 30)
    assert "but BRAM is not once the board's share" in text
