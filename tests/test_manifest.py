"""OUT/manifest.json is read and written in one place (qloom.manifest), schema checked."""

import json

import pytest

from qloom.manifest import FORMAT, ManifestError, is_design, read_manifest, write_manifest

PORT = {"lanes": 2, "element_bits": 4, "payload_bits": 9, "last_bit": 8,
        "words_per_frame": 3, "elements_per_frame": 5,
        "dtype": {"name": "INT4", "bits": 4, "signed": True}}
GOOD = {"format": FORMAT, "qloom_version": "0.1.0", "top": "qloom_top",
        "rtl": ["rtl/qloom_top.v"], "clock_mhz": 100.0, "input": PORT, "output": PORT,
        "layers": [], "ideal_ii_cycles": 3}


def test_round_trip(tmp_path):
    write_manifest(tmp_path, GOOD)
    assert read_manifest(tmp_path) == GOOD and is_design(tmp_path)


@pytest.mark.parametrize("change, message", [
    ({"format": 2}, r"unsupported manifest format 2 \(this qloom reads format 1\)"),
    ({"top": 3}, r"'top' is 3, not a valid str"),
    ({"clock_mhz": "fast"}, r"'clock_mhz' is 'fast', not a valid number"),
    ({"input": dict(PORT, lanes=True)}, r"'input.lanes' is True, not a valid int"),
    ({"input": dict(PORT, registered="yes")}, r"'input.registered' is 'yes', not a valid bool"),
    ({"output": None}, r"'output' is None, not a valid dict"),
    ({"rtl": "a.v"}, r"'rtl' is 'a.v', not a valid list"),
    ({"rtl": ["a.v", 3]}, r"'rtl' and 'sim_rtl' must list file names"),
])
def test_schema_errors_name_the_key(tmp_path, change, message):
    (tmp_path / "manifest.json").write_text(json.dumps({**GOOD, **change}))
    with pytest.raises(ManifestError, match=message):
        read_manifest(tmp_path)
    with pytest.raises(ManifestError, match=message):
        write_manifest(tmp_path, {**GOOD, **change})


def test_ports_required_when_asked(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({k: v for k, v in GOOD.items()
                                                        if k != "input"}))
    assert "input" not in read_manifest(tmp_path)
    with pytest.raises(ManifestError, match=r"'input' is None, not a valid dict"):
        read_manifest(tmp_path, ports=True)


@pytest.mark.parametrize("text, message", [
    (None, r"manifest.json not found: .* is not a compiled design folder"),
    ("{not json", r"cannot read .*manifest.json"),
    ("[1, 2]", r"must hold a JSON object, not list"),
])
def test_missing_or_broken_file(tmp_path, text, message):
    if text is not None:
        (tmp_path / "manifest.json").write_text(text)
    with pytest.raises(ManifestError, match=message):
        read_manifest(tmp_path)
    assert not is_design(tmp_path)
