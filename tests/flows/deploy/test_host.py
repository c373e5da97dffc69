"""The host driver against a board simulated in Python at the protocol level."""

import numpy as np
import pytest

from qloom.flows.deploy import host
from qloom.flows.deploy.host import HostLink, LinkError, run_on_board
from qloom.hw.protocol import Status, WireFormat, decode_request, encode_reply

FIN = WireFormat(lanes=8, element_bits=1, signed=False, elements=20)
FOUT = WireFormat(lanes=2, element_bits=6, signed=True, elements=3)


def ref_model(x):
    x = np.asarray(x)
    return np.array([int(x.sum()) - 10, int(x[:5].sum()), -int(x[5:].sum()) // 2])


class FakeBoard:
    """A serial port whose far end is the board's protocol. ``faults`` is a list of what
    to do to successive requests: None (answer), "corrupt" (flip a reply bit), "drop"
    (say nothing), "bad_crc" (answer BAD_CRC), "wrong" (compute a wrong output)."""

    def __init__(self, faults=()):
        self.faults = list(faults)
        self.rx = b""
        self.tx = b""
        self.requests = 0

    def write(self, data):
        self.rx += data
        payload, used = decode_request(self.rx)
        self.rx = self.rx[used:]
        if payload is None:
            return len(data)
        self.requests += 1
        fault = self.faults.pop(0) if self.faults else None
        if fault == "drop":
            return len(data)
        if fault == "bad_crc":
            self.tx += encode_reply(Status.BAD_CRC)
            return len(data)
        y = ref_model(FIN.unpack(payload))
        if fault == "wrong":
            y = y + 1
        reply = bytearray(encode_reply(Status.OK, FOUT.pack(y)))
        if fault == "corrupt":
            reply[5] ^= 0x02
        self.tx += bytes(reply)
        return len(data)

    def read(self, n):
        data, self.tx = self.tx[:n], self.tx[n:]
        return data


def frames(n, seed=0):
    return np.random.default_rng(seed).integers(0, 2, (n, FIN.elements))


def test_infer_frames():
    board = FakeBoard()
    link = HostLink(board, FIN, FOUT)
    xs = frames(5)
    outputs, report = run_on_board(link, xs, np.array([ref_model(x) for x in xs]))
    assert report.frames == 5 and report.mismatches == [] and report.errors == {}
    assert np.array_equal(outputs, [ref_model(x) for x in xs])
    assert board.requests == 5


def test_retries_after_errors():
    board = FakeBoard(["corrupt", None, "bad_crc", "drop", None])
    link = HostLink(board, FIN, FOUT, timeout=0.05, retry_gap=0.0)
    xs = frames(2, seed=1)
    outputs, report = run_on_board(link, xs)
    assert np.array_equal(outputs, [ref_model(x) for x in xs])
    assert board.requests == 5
    assert report.errors == {"corrupt reply": 1, "BAD_CRC": 1, "no reply": 1}


def test_gives_up():
    link = HostLink(FakeBoard(["bad_crc"] * 3), FIN, FOUT, retries=2, retry_gap=0.0)
    with pytest.raises(LinkError, match=r"^frame failed after 3 attempts: the board answered "
                                        r"BAD_CRC$"):
        link.infer(frames(1)[0])


def test_mismatches_reported():
    board = FakeBoard([None, "wrong"])
    xs = frames(2, seed=2)
    expected = np.array([ref_model(x) for x in xs])
    _, report = run_on_board(HostLink(board, FIN, FOUT), xs, expected)
    assert [(f, e) for f, e, _, _ in report.mismatches] == [(1, 0), (1, 1), (1, 2)]
    assert all(got == want + 1 for _, _, want, got in report.mismatches)


def test_validation():
    with pytest.raises(TypeError, match=r"^Input format must be a WireFormat, not 8$"):
        HostLink(FakeBoard(), 8, FOUT)
    with pytest.raises(TypeError, match=r"^Retries must be a non-negative integer, not -1$"):
        HostLink(FakeBoard(), FIN, FOUT, retries=-1)


def test_run_cli(tmp_path, monkeypatch, capsys):
    """`qloom run`: reference from OUT's model (stubbed here), frames over the port."""
    import json
    out = tmp_path / "out"
    (out / "build").mkdir(parents=True)
    port = lambda fmt: {"lanes": fmt.lanes, "element_bits": fmt.element_bits,  # noqa: E731
                        "signed": fmt.signed, "elements_per_frame": fmt.elements,
                        "payload_bits": fmt.lanes * fmt.element_bits + 1,
                        "last_bit": fmt.lanes * fmt.element_bits,
                        "words_per_frame": -(-fmt.elements // fmt.lanes), "dtype": {}}
    (out / "manifest.json").write_text(json.dumps(
        {"format": 1, "top": "qloom_top", "rtl": [], "input": port(FIN),
         "output": port(FOUT), "model_file": "model.onnx"}))
    (out / "build" / "report.json").write_text(json.dumps({"baud": 921600}))
    xs = frames(4, seed=3)
    np.save(tmp_path / "x.npy", xs.astype(np.float32))
    expected = np.array([ref_model(x) for x in xs])
    expected[2, 1] += 1                                    # one wrong reference element
    opened = {}
    monkeypatch.setattr(host, "reference", lambda o, x: (np.asarray(x, int), expected, None))
    monkeypatch.setattr(host, "open_serial",
                        lambda dev, baud: opened.setdefault("port", (dev, baud)) and FakeBoard())
    from qloom.flows.cli import main
    code = main(["run", str(out), "--port", "/dev/ttyFAKE", "--inputs",
                 str(tmp_path / "x.npy")])
    text = capsys.readouterr().out
    assert code == 1
    assert opened["port"] == ("/dev/ttyFAKE", 921600)
    assert "mismatch: frame 2 element 1" in text
    assert "4 frames, 1 mismatching elements" in text


class LateBoard(FakeBoard):
    """Holds the reply to the requests listed in ``late`` back until the next request
    arrives, as a board slowed down (or a simulated one under load) answers after the
    host's attempt has timed out."""

    def __init__(self, late):
        super().__init__()
        self.late, self.held = set(late), b""

    def write(self, data):
        before, count = self.tx, self.requests
        n = super().write(data)
        if self.requests != count:
            reply, self.tx = self.tx[len(before):], before + self.held
            self.held = b""
            if self.requests in self.late:
                self.held = reply
            else:
                self.tx += reply
        return n


def test_a_late_reply_is_not_taken_for_the_next_frame():
    """Frame 1's first attempt is answered only after its retry was sent: both replies
    arrive, the host takes one for frame 1 and drops the other instead of reading it as
    frame 2's answer."""
    board = LateBoard(late={1})
    link = HostLink(board, FIN, FOUT, timeout=0.2, retry_gap=0.0)
    xs = frames(3, seed=2)
    outputs, report = run_on_board(link, xs, np.array([ref_model(x) for x in xs]))
    assert report.mismatches == []
    assert np.array_equal(outputs, [ref_model(x) for x in xs])
    assert report.errors == {"no reply": 1, "late reply": 1}
