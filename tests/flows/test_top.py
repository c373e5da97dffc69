"""The compiled accelerator top (engines, FIFOs, width converters, duplicators) against the
integer reference, in Amaranth simulation with random stalls: networks built directly in
the IR so that these tests do not depend on the ONNX frontend."""

import numpy as np
import pytest

from qloom.flows.compile.steps import CompileConfig, run_steps
from qloom.sim.packing import pack_frames, unpack_frames
from qloom.sim.pysim import run_stream

from nets import binary_mlp, conv_net, inception_net, multibit_mlp, random_input, residual_mlp


def rtl_run(net, x, cfg=CompileConfig(), stall=0.0, seed=0):
    state = run_steps(net, cfg, until="build")
    top = state.top
    in_lanes = top.in_layout["data"].shape.length
    out_lanes = top.out_layout["data"].shape.length
    in_info, out_info = net.tensors[net.input], net.tensors[net.output]
    codes = pack_frames(x, in_info.dtype, in_lanes)
    payloads = [{"data": [int(c) for c in word], "last": int(w == codes.shape[1] - 1)}
                for frame in codes for w, word in enumerate(frame)]
    n = x.shape[0]
    out_words = top.out_words
    run = run_stream(top, payloads, n * out_words, in_stall=stall, out_stall=stall, seed=seed)
    lasts = [o["last"] for o in run.outputs]
    assert lasts == ([0] * (out_words - 1) + [1]) * n, "last must mark each frame's final word"
    got = np.array([o["data"] for o in run.outputs]).reshape(n, out_words, out_lanes)
    elements = int(np.prod(out_info.shape))
    return unpack_frames(got, out_info.dtype, elements), state, run


@pytest.mark.parametrize("make", [binary_mlp, multibit_mlp, residual_mlp, conv_net,
                                  inception_net])
def test_top_matches_reference_under_stalls(make):
    net = make()
    x = random_input(net, 3)
    expected = net.execute_int(x).reshape(3, -1)
    got, _, _ = rtl_run(net, x, stall=0.3)
    np.testing.assert_array_equal(got, expected)


def test_top_fold_file_with_width_conversion():
    net = multibit_mlp()
    fold = {"dense0": {"pe": 4, "simd": 3}, "dense2": {"pe": 3, "simd": 2},
            "dense4": {"pe": 1, "simd": 6}}
    x = random_input(net, 3)
    got, state, _ = rtl_run(net, x, CompileConfig(fold=fold), stall=0.2)
    np.testing.assert_array_equal(got, net.execute_int(x).reshape(3, -1))
    assert state.plan.folds["dense0"].pe == 4


def test_top_throughput_matches_bottleneck():
    net = binary_mlp()
    x = random_input(net, 8)
    _, state, run = rtl_run(net, x)
    words = state.top.out_words
    ends = run.out_cycles[words - 1::words]
    ii = np.median(np.diff(ends[len(ends) // 2:]))
    ideal = state.plan.ideal_ii_cycles
    assert ideal <= ii <= 1.1 * ideal + 1, (ii, ideal)


@pytest.mark.parametrize("make", [binary_mlp, conv_net])
def test_top_with_registered_fifo_reads(make, monkeypatch):
    """The edges' FIFOs with their registered read (on the ECP5 where their storage is
    block RAM; here every FIFO of 4 words or more), exact under stalls."""
    from qloom.hw import top as top_module
    monkeypatch.setattr(top_module, "fifo_registered_read",
                        lambda depth, width, family: depth >= 4)
    net = make()
    x = random_input(net, 3)
    got, state, _ = rtl_run(net, x, stall=0.3)
    np.testing.assert_array_equal(got, net.execute_int(x).reshape(3, -1))


def test_edge_estimate_counts_the_registered_read():
    """A deep ECP5 edge: its FIFO's memory holds two words fewer than its depth, the read
    register being one (which the block holds)."""
    from qloom.hw.estimate import Family, bram_count, fifo_block_ram
    from qloom.hw.fifo import fifo_registered_read
    from qloom.hw.top import edge_depth, estimate_edge
    depth = edge_depth(4096, 8)
    assert fifo_registered_read(depth, 8 * 4, Family.ECP5)
    f = estimate_edge(src_lanes=8, dst_lanes=8, bits=4, elements=4096, family=Family.ECP5)
    assert fifo_block_ram(depth - 1, 32, Family.ECP5)
    assert f.bram == bram_count(depth - 2, 32, Family.ECP5)
    g = estimate_edge(src_lanes=8, dst_lanes=8, bits=4, elements=4096, family=Family.ICE40)
    assert fifo_block_ram(depth - 1, 32, Family.ICE40)
    assert g.bram == bram_count(depth - 1, 32, Family.ICE40)


def test_slice_edges_are_one_skid_buffer():
    """Edges next to an engine that buffers its own results (the unrolled chain) are one
    register slice: estimated as one skid buffer, refused where they would have to buffer
    or convert widths."""
    from qloom.hw.estimate import Family, calibrated
    from qloom.hw.top import AcceleratorTop, estimate_edge
    state = run_steps(multibit_mlp(), CompileConfig(latency=True), until="build")
    (chain,) = state.engines
    graph = state.plan.graph
    assert graph.slices == {(state.input, chain.name), (state.output, "output")}
    # At the top's ports the chain's registered ports need no slice: plain connections,
    # estimated as nothing.
    assert graph.wires == graph.slices and graph.registered_input
    assert all(not parts for parts in graph.features(state.options).values())
    one = estimate_edge(src_lanes=8, dst_lanes=8, bits=4, elements=0, family=Family.ECP5,
                        fifo=False)
    full = estimate_edge(src_lanes=8, dst_lanes=8, bits=4, elements=0, family=Family.ECP5)
    one, full = calibrated(one, Family.ECP5), calibrated(full, Family.ECP5)
    assert one.bram == 0 and 0 < one.ff < full.ff and 0 < one.lut < full.lut
    top = state.top
    with pytest.raises(ValueError, match="buffer elements, so they need a FIFO"):
        AcceleratorTop(nodes=top.nodes, input=top.input, output=top.output,
                       in_lanes=top.in_layout["data"].shape.length,
                       out_lanes=top.out_layout["data"].shape.length, in_words=1,
                       out_words=1, edge_elements={(top.output, "output"): 4},
                       slices={(top.output, "output")})
    ports = dict(nodes=top.nodes, input=top.input, output=top.output,
                 in_lanes=top.in_layout["data"].shape.length,
                 out_lanes=top.out_layout["data"].shape.length, in_words=1, out_words=1)
    with pytest.raises(ValueError, match="are wires but not slices"):
        AcceleratorTop(**ports, wires={(top.output, "output")})


def test_top_refuses_planned_edges_it_does_not_build():
    """The plan keys an edge by its reader's engine (``Node.reader``); an edge the top
    would not build is an error, not a FIFO silently built at the smallest depth (a
    three-input concat's first unit, named apart from its engine, lost its skip buffer)."""
    from qloom.hw.top import AcceleratorTop
    state = run_steps(inception_net(), CompileConfig(), until="build")
    top = state.top
    readers = {node.reader for node in top.nodes}
    assert all(reader in readers for _, reader in top.edge_elements)
    cat = next(n for n in top.nodes if n.name.startswith("cat") and n.name != n.reader)
    with pytest.raises(ValueError, match="not edges of the graph"):
        AcceleratorTop(nodes=top.nodes, input=top.input, output=top.output,
                       in_lanes=top.in_layout["data"].shape.length,
                       out_lanes=top.out_layout["data"].shape.length, in_words=1,
                       out_words=1, edge_elements={(cat.inputs[0], cat.name): 64})
