import json

from qloom.nn.summary import render_table, summarize


def test_summary_of_tfc(load_example):
    s = summarize(load_example("tfc_w1a1"))
    json.dumps(s)   # JSON-ready
    first = s["layers"][0]
    assert first == {"name": "MatMul_0", "op": "Dense", "input_shape": [784],
                     "output_shape": [64], "input_type": "BIPOLAR", "weight_type": "BIPOLAR",
                     "output_type": "INT11", "macs": 784 * 64, "weight_bits": 784 * 64}
    assert s["totals"]["macs"] == 784 * 64 + 64 * 64 * 2 + 64 * 10
    assert s["totals"]["layers"] == 7
    assert s["prefix_ops"] == ["Reshape", "Mul", "Sub", "BipolarQuant"]
    thr = s["layers"][1]
    assert thr["op"] == "MultiThreshold" and thr["macs"] == 0 and thr["weight_bits"] == 64 * 11


def test_render_table(load_example):
    text = render_table(summarize(load_example("jettagging_w6a6", input_type=None)))
    lines = text.splitlines()
    assert lines[0].startswith("tf2onnx: input global_in 1x16 -> INT16")
    assert "tail: Add, Softmax" in lines[0]
    assert lines[1].split()[:2] == ["layer", "op"]
    assert lines[3].split()[:4] == ["MatMul_0", "Dense", "16", "64"]
    assert lines[-2].split()[:3] == ["total", "7", "layers"]
    # 4,256 six-bit weights plus one requantization offset per channel (64x24 + 2x32x15 bits)
    assert lines[-2].split()[-2:] == ["4,256", "28,032"]
    assert lines[-1].startswith("tail: Add, Softmax on the host in float32 (qonnx) from the "
                                "integer accumulator of MatMul_3: bit for bit")
