"""Smoke tests of the story scenarios (worm, rcu): they run, conserve packets,
are deterministic, and their knobs are validated.  Calibration is not tested
here (those scenarios are not calibrated yet)."""

import pytest

from routelab.errors import KnobError
from routelab.scenarios import SCENARIOS, get


@pytest.mark.parametrize("name, knobs", [
    ("worm", dict(duration=1.0, worm_hosts=2)),
    ("worm", dict(duration=1.0, worm_hosts=2, kernel="2.4.24-nocache")),
    ("rcu", dict(duration=0.1, pps_per_port=50_000)),
    ("rcu", dict(duration=0.1, pps_per_port=50_000, kernel="2.6.0-rcu-bh", cpus=1)),
])
def test_scenario_runs_conserves_and_repeats(name, knobs):
    mod = get(name)
    a = mod.run(seed=3, **knobs)
    b = mod.run(seed=3, **knobs)
    assert a.conservation()
    assert a.summary() == b.summary()
    assert (a.packets["outcome"] == b.packets["outcome"]).all()


def test_rcu_scenario_reports_user_delay_and_grace_periods():
    res = get("rcu").run(seed=1, duration=0.3, pps_per_port=200_000, max_size=4096)
    s = res.summary()
    assert "user_max_delay_s" in s and s["user_max_delay_s"] > 0
    assert res.extra["grace_periods_s"].size > 0


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_unknown_and_bad_knobs_are_refused(name):
    mod = get(name)
    with pytest.raises(KnobError, match="duration"):
        mod.run(duration=-1)
    with pytest.raises(KnobError, match="nosuch"):
        mod.run(nosuch=1)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_scenario_runs_through_run_scenario(name, monkeypatch):
    """One path for every scenario (validation, seed, annotations): none bypasses it."""
    mod = get(name)
    seen = []

    def spy(*a, **kw):
        seen.append(a[0])
        raise RuntimeError("stop")

    monkeypatch.setattr(mod, "run_scenario", spy)
    with pytest.raises(RuntimeError, match="stop"):
        mod.run(seed=1, duration=0.2)
    assert seen == [mod.NAME]
