"""routelab._malloc: glibc allocator tuning applied once per process, and optional."""

from __future__ import annotations

import platform
import sys

import pytest

from routelab import _malloc


def test_tune_runs_once_per_process(monkeypatch):
    monkeypatch.setattr(_malloc, "_done", False)
    first = _malloc.tune()
    if sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc":
        assert first is True            # glibc accepts the three settings
    assert _malloc.tune() is False      # already applied: nothing done twice


@pytest.mark.parametrize("value", ["0"])
def test_tune_can_be_turned_off(monkeypatch, value):
    monkeypatch.setattr(_malloc, "_done", False)
    monkeypatch.setenv("ROUTELAB_MALLOC_TUNE", value)
    assert _malloc.tune() is False
