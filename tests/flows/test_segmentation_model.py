"""A conv net with an image output (a [1, 8, 8, 2] segmentation map, channels-last as a
Keras model ends): compiled, simulated in Icarus under random backpressure bit for bit,
``OUT/sim/outputs.npy`` in the model's output shape, the report naming both shapes, and
the host driver (``qloom run --outputs``) against a board answering at the protocol level
from the integer reference."""

import json
import shutil

import numpy as np
import pytest

import qloom
from qloom.flows.deploy import host
from qloom.flows.cli import main
from qloom.hw.protocol import Status, WireFormat, decode_request, encode_reply

from foreign_models import segmentation_inputs, segmentation_net

pytestmark = pytest.mark.skipif(shutil.which("iverilog") is None,
                                reason="Icarus Verilog is not installed (apt-get install iverilog)")


@pytest.fixture(scope="module")
def design(tmp_path_factory):
    out = tmp_path_factory.mktemp("seg") / "out"
    return qloom.compile(segmentation_net(nhwc_output=True), out)


def test_rtl_bit_exact_under_backpressure_and_outputs_in_the_models_shape(design):
    x = segmentation_inputs(20)
    res = design.simulate(x, backpressure=0.3, progress=False)
    assert res["frames"] == 20 and res["mismatches"] == 0, res["first_mismatch"]
    outputs = np.load(design.out_dir / "sim" / "outputs.npy")
    assert outputs.shape == (20, 8, 8, 2)
    np.testing.assert_array_equal(outputs, design.network.execute(x))
    report = (design.out_dir / "report.md").read_text()
    assert "input [1, 3, 8, 8] -> output [1, 8, 8, 2]" in report
    assert json.loads((design.out_dir / "report.json").read_text())["io"]["output_shape"] \
        == [1, 8, 8, 2]


def test_cli_random_frames(design, capsys):
    assert main(["simulate", str(design.out_dir), "--random", "3", "--backpressure",
                 "0.2"]) == 0
    assert "3 bit-exact, 0 mismatching" in capsys.readouterr().out
    assert np.load(design.out_dir / "sim" / "outputs.npy").shape == (3, 8, 8, 2)


class ReferenceBoard:
    """A serial port whose far end answers each request from the integer network."""

    def __init__(self, net, fin: WireFormat, fout: WireFormat, wrong=None):
        self.net, self.fin, self.fout, self.wrong = net, fin, fout, wrong
        self.rx, self.tx = b"", b""

    def write(self, data):
        self.rx += data
        payload, used = decode_request(self.rx)
        self.rx = self.rx[used:]
        if payload is not None:
            info = self.net.tensors[self.net.input]
            values = info.dtype.decode(self.fin.unpack(payload)).reshape(1, *info.shape)
            out = self.net.tensors[self.net.output].dtype.encode(self.net.execute_int(values))
            if self.wrong is not None:          # one element off by one
                out = out.ravel().copy()
                out[self.wrong] += 1 if out[self.wrong] < 0 else -1
            self.tx += encode_reply(Status.OK, self.fout.pack(out.ravel()))
        return len(data)

    def read(self, n):
        data, self.tx = self.tx[:n], self.tx[n:]
        return data


def test_host_driver_writes_outputs_of_any_rank(design, tmp_path, monkeypatch, capsys):
    manifest = design.manifest
    fin, fout = (WireFormat.from_manifest(manifest[p]) for p in ("input", "output"))
    monkeypatch.setattr(host, "open_serial",
                        lambda dev, baud: ReferenceBoard(design.network, fin, fout))
    x = segmentation_inputs(5, seed=4)
    np.save(tmp_path / "x.npy", x)
    assert main(["run", str(design.out_dir), "--port", "/dev/ttyFAKE", "--inputs",
                 str(tmp_path / "x.npy"), "--outputs", str(tmp_path / "y.npy")]) == 0
    text = capsys.readouterr().out
    assert "5 frames, 0 mismatching elements" in text
    assert "outputs [8, 8, 2] per frame written to" in text
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), design.network.execute(x))


def test_host_driver_names_a_wrong_element_by_its_position(design, tmp_path, monkeypatch,
                                                           capsys):
    manifest = design.manifest
    fin, fout = (WireFormat.from_manifest(manifest[p]) for p in ("input", "output"))
    monkeypatch.setattr(host, "open_serial",
                        lambda dev, baud: ReferenceBoard(design.network, fin, fout, wrong=37))
    np.save(tmp_path / "x.npy", segmentation_inputs(2))
    assert main(["run", str(design.out_dir), "--port", "/dev/ttyFAKE", "--inputs",
                 str(tmp_path / "x.npy")]) == 1
    text = capsys.readouterr().out
    # element 37 of the [8, 8, 2] stream is row 2, column 2, channel 1
    assert "mismatch: frame 0 element 37 (at [2, 2, 1] of the channels-last output " \
           "[8, 8, 2])" in text
