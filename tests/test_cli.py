"""Tests for the command line, run as a user would: ``python -m routelab ...``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from routelab.cli import main as cli_main
from routelab.scenarios import SCENARIOS, get

ROOT = Path(__file__).resolve().parents[1]


def cli(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "routelab", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def test_json_output():
    p = cli("ping", "--json", "--duration", "0.5", "--background-pps", "300")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert {"scenario", "knobs", "summary", "counters"} <= set(out)
    assert out["scenario"] == "ping" and out["knobs"]["duration"] == 0.5
    assert out["knobs"]["background_pps"] == 300.0
    s = out["summary"]
    assert s["offered_packets"] == s["forwarded_packets"] + s["local_packets"] \
        + s["dropped_packets"]
    assert len(out["counters"]["rt_cache_stat"][0]) == 17


def test_same_seed_same_json():
    a = cli("ping", "--json", "--duration", "0.3", "--seed", "7")
    b = cli("ping", "--json", "--duration", "0.3", "--seed", "7")
    assert a.returncode == b.returncode == 0
    assert json.loads(a.stdout)["summary"] == json.loads(b.stdout)["summary"]


def test_bad_value_exits_2_with_one_line():
    p = cli("ping", "--background-pps", "-5", "--duration", "0.2")
    assert p.returncode == 2
    err = p.stderr.strip().splitlines()
    assert len(err) == 1, p.stderr
    assert "background_pps" in err[0] and "-5" in err[0] and "[0, 2000000]" in err[0]
    assert "Traceback" not in p.stderr and p.stdout == ""


def test_unknown_kernel_exits_2():
    p = cli("ping", "--kernel", "2.5.99", "--duration", "0.2")
    assert p.returncode == 2
    assert "kernel" in p.stderr and "2.5.99" in p.stderr and "2.6.0" in p.stderr
    assert "Traceback" not in p.stderr


def test_bad_seed_exits_2():
    p = cli("ping", "--seed", "-1", "--duration", "0.2")
    assert p.returncode == 2 and "seed" in p.stderr


def test_help_lists_knobs():
    p = cli("ping", "--help")
    assert p.returncode == 0
    for flag in ("--kernel", "--background-pps", "--gc-thresh", "--max-size", "--duration",
                 "--seed", "--json"):
        assert flag in p.stdout
    top = cli("--help")
    assert top.returncode == 0 and "ping" in top.stdout


def test_text_output_with_proc():
    p = cli("ping", "--duration", "0.3", "--proc")
    assert p.returncode == 0, p.stderr
    assert "offered_packets" in p.stdout and "/proc/net/rt_cache_stat" in p.stdout
    assert "Kernel Interface table" in p.stdout


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_scenario_help_lists_every_knob(name, capsys, monkeypatch):
    """``--help`` exits 0 for every scenario and shows each knob's flag and help text.

    argparse %-formats help strings, so a knob whose help says "40 %" used to crash
    ``python -m routelab worm --help`` with a traceback (the CLI now escapes it).
    """
    monkeypatch.setenv("COLUMNS", "100")
    with pytest.raises(SystemExit) as exc:
        cli_main([name, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    flat = "".join(out.split())  # argparse re-wraps the help text
    for knob in get(name).KNOBS.values():
        assert "--" + knob.name.replace("_", "-") in out, knob.name
        assert "".join(knob.help.split()) in flat, knob.name


def test_help_with_a_percent_in_every_text(monkeypatch, capsys):
    """Any knob help, title or range text may carry ``%`` (or ``%(prog)s``) literally."""
    from dataclasses import replace

    from routelab.scenarios import ping

    name, knob = next(iter(ping.KNOBS.items()))
    monkeypatch.setattr(ping, "TITLE", "100 % ping")
    monkeypatch.setitem(ping.KNOBS, name, replace(knob, help="share in % of %(prog)s, 5%d"))
    with pytest.raises(SystemExit) as exc:
        cli_main(["ping", "--help"])
    assert exc.value.code == 0
    assert "share in % of %(prog)s, 5%d" in " ".join(capsys.readouterr().out.split())
    with pytest.raises(SystemExit):
        cli_main(["--help"])
    assert "100 % ping" in capsys.readouterr().out
