"""The engine graph a plan carries (``qloom.flows.compile.graph.EngineGraph``) is the graph the
accelerator top wires: the same edges, the same FIFO contents, slices and wires."""

import pytest

from qloom.flows.compile.steps import CompileConfig, run_steps
from qloom.flows.compile.graph import EdgeKind, EngineGraph

from nets import binary_mlp, conv_net, inception_net, multibit_mlp, residual_mlp
from unet_model import unet_model


def _top_edges(top) -> set:
    """The (tensor, reader) edges the top builds, the output's included."""
    edges = {(t, node.reader) for node in top.nodes for t in node.inputs}
    return edges | {(top.output, "output")}


@pytest.mark.parametrize("net, cfg", [
    (binary_mlp(), CompileConfig()), (multibit_mlp(), CompileConfig(latency=True)),
    (residual_mlp(), CompileConfig()), (conv_net(), CompileConfig()),
    (inception_net(), CompileConfig()), (unet_model(), CompileConfig())],
    ids=["binary", "latency", "residual", "conv", "inception", "unet"])
def test_the_top_is_built_from_the_plans_graph(net, cfg):
    state = run_steps(net, cfg, until="build")
    graph, top = state.plan.graph, state.top
    assert graph.engines == state.plan.engines and dict(graph.folds) == state.plan.folds
    keys = {x.key for x in graph.edges}
    # Edges into any of an engine's nodes are keyed by the engine.
    inner = {(t, e.name) for e in graph.engines for t, *_ in e.inner_edges(graph.folds[e.name])}
    assert keys | inner == _top_edges(top)
    assert top.edge_elements == graph.edge_elements
    assert top.slices == graph.slices and top.wires == graph.wires
    assert top.in_layout["data"].shape.length == graph.port_lanes(state.input, state.output)[0]
    # Every skip buffer is on an edge between engines, and its FIFO holds it.
    for s in graph.skips:
        assert graph.edge_elements[(s.tensor, s.reader)] >= s.elements > 0
    assert {r["tensor"] for r in graph.skip_rows()} == {s.tensor for s in graph.skips}


def test_edge_kinds():
    state = run_steps(multibit_mlp(), CompileConfig(latency=True), until="fold")
    assert {x.kind for x in state.plan.graph.edges} == {EdgeKind.WIRE}
    state = run_steps(binary_mlp(), CompileConfig(), until="fold")
    graph = state.plan.graph
    assert all(x.kind is EdgeKind.FIFO for x in graph.edges)
    assert not graph.registered_input and not graph.slices
    again = EngineGraph.build(graph.engines, graph.folds)
    assert again.edges == graph.edges
