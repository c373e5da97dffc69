"""Small design folders shared by the build, deploy and script tests: a toy accelerator
compiled into an OUT folder, and a stand-in for a finished build."""

import importlib.util
import json
from pathlib import Path

from qloom.nn.dtypes import uint_type


def toy_out(path: Path) -> Path:
    spec = importlib.util.spec_from_file_location(
        "toy_top", Path(__file__).parents[1] / "sim" / "toy_top.py")
    toy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(toy)
    return toy.write_toy_out(path, uint_type(4), 3, 10)


def fake_build(out, board, bitstream=True):
    build = out / "build"
    build.mkdir(parents=True)
    report = {"board": board, "target_mhz": 48.0, "fmax_mhz": 61.2, "baud": 1_000_000}
    if bitstream:
        (build / "board_top.bin").write_bytes(b"\x7e\xaa\x99\x7e" * 100)
        report["bitstream"] = str(build / "board_top.bin")
    else:
        report["bitstream"] = None
        report["vendor_script"] = str(build / "build_board_top.sh")
    (build / "report.json").write_text(json.dumps(report))
