"""`qloom deploy`: program script, bitstream copy, run script and instructions."""

import os

import pytest

from qloom.errors import QloomError
from qloom.flows.deploy.bundle import deploy

from designs import fake_build


def test_deploy_icebreaker(tmp_path):
    out = tmp_path / "out"
    fake_build(out, "icebreaker")
    dest = deploy(out)
    assert dest == (out / "deploy").resolve()
    assert sorted(p.name for p in dest.iterdir()) == ["README.txt", "board_top.bin",
                                                     "program.sh", "run.sh"]
    assert (dest / "board_top.bin").read_bytes() == (out / "build" / "board_top.bin").read_bytes()
    program = (dest / "program.sh").read_text()
    assert program.startswith("#!/bin/sh\n") and "\niceprog board_top.bin\n" in program
    run = (dest / "run.sh").read_text()
    assert 'qloom run .. --port "$1" --inputs "$2" --baud 1000000 ${3:+--outputs "$3"}' in run
    for name in ("program.sh", "run.sh"):
        assert os.access(dest / name, os.X_OK)
    readme = (dest / "README.txt").read_text()
    assert "FTDI channel B" in readme and "1000000 baud" in readme


def test_deploy_replaces_and_ulx3s(tmp_path):
    out = tmp_path / "out"
    fake_build(out, "ulx3s-85f")
    (out / "deploy").mkdir()
    (out / "deploy" / "stale.txt").write_text("old")
    dest = deploy(out)
    assert not (dest / "stale.txt").exists()
    assert "openFPGALoader -b ulx3s board_top.bit" in (dest / "program.sh").read_text()
    assert (dest / "board_top.bit").read_bytes() == (out / "build" / "board_top.bin").read_bytes()
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []


def test_deploy_vendor_board(tmp_path):
    out = tmp_path / "out"
    fake_build(out, "arty-a7-35", bitstream=False)
    dest = deploy(out)
    program = (dest / "program.sh").read_text()
    assert "Vivado" in program and "build_board_top.sh" in program
    assert "openFPGALoader -b arty ../build/board_top.bit" in program


def test_deploy_needs_a_build(tmp_path):
    with pytest.raises(QloomError, match=r"has no build: run `qloom build .* --board B` first$"):
        deploy(tmp_path)
    out = tmp_path / "out"
    fake_build(out, "icebreaker")
    (out / "build" / "board_top.bin").unlink()
    with pytest.raises(QloomError, match=r"the bitstream .*board_top\.bin named in .* is missing"):
        deploy(out)
    assert not (out / "deploy").exists()
