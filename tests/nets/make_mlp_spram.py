"""Make ``mlp_w1a1_spram.onnx``: a binary MLP with 0.79 Mbit of weights, the size class
that fits the iCE40UP5K only with its weights in SPRAM (its 30 block RAMs hold 120 Kbit).

    .venv/bin/python tests/nets/make_mlp_spram.py [--out DIR]

brevitas' FC topology (the LFC's, ``brevitas_examples.bnn_pynq.models.FC``) with
256 inputs (digits resized to 16 x 16), hidden layers of 1024 and 512, 10 outputs, 1-bit
weights and activations: 256*1024 + 1024*512 + 512*10 = 791,552 weight bits. Trained and
exported like the other networks here (``make_nets.make``: a few epochs on scikit-learn's
digits, ``export_qonnx``, qonnx cleanup), seeded; writes ``mlp_w1a1_spram.onnx`` and
``mlp_w1a1_spram_inputs.npy`` (200 held-out digits). Needs the ``train`` extra.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from make_nets import NetSpec, make   # noqa: E402


def _mlp():
    from brevitas_examples.bnn_pynq.models.FC import FC
    return FC(num_classes=10, weight_bit_width=1, act_bit_width=1, in_bit_width=1,
              in_channels=1, out_features=[1024, 512], in_features=(16, 16))


SPEC = NetSpec("mlp_w1a1_spram", _mlp, side=16, channels=1, epochs=4, batch=64, lr=5e-3)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="output folder (default: here)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    make(SPEC, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
