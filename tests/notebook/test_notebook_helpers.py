"""routelab.notebook: controls from knobs, the Explorer, figures, answer checks (headless)."""

from __future__ import annotations

import base64
import html
import io
import re

import ipywidgets as W
import numpy as np
import pytest
from matplotlib.figure import Figure
from PIL import Image

from routelab import KnobError
from routelab.notebook import (
    EXPLORERS,
    OKABE_ITO,
    Explorer,
    control_for,
    new_figure,
    packet_journey_explorer,
    ping_journey_figure,
    say,
    show,
)
from routelab.notebook.checks import choice_feedback, number_feedback
from routelab.notebook.plots import (
    PNG_SIGNATURE,
    PingJourneyFigure,
    img_html,
    nice_ceiling,
    ping_series,
    png_bytes,
)
from routelab.notebook.widgets import READOUT_CLASS
from routelab.scenarios import ping
from routelab.sysctl import SYSCTLS, Knob

# -- controls from knob metadata ------------------------------------------------------

def test_int_knob_gives_int_slider_with_knob_range():
    k = SYSCTLS["gc_elasticity"]
    w = control_for(k)
    assert isinstance(w, W.IntSlider)
    assert (w.min, w.max, w.value) == (k.min, k.max, k.default)
    assert w.routelab_name == "gc_elasticity"
    assert k.unit in w.description and k.help.split()[0] in w.tooltip
    assert w.continuous_update is False


def test_float_bool_and_choice_knobs():
    k = ping.KNOBS
    f = control_for(k["background_pps"], max=12000.0)
    assert isinstance(f, W.FloatSlider) and f.max == 12000.0 and f.step == k["background_pps"].step
    assert f.readout_format == ",.0f"
    assert isinstance(control_for(k["ping_df"]), W.Checkbox)
    d = control_for(k["cpu"])
    assert isinstance(d, W.Dropdown) and tuple(d.options) == k["cpu"].choices
    assert control_for(k["cpu"], options=("k6-200", "duron-900")).options == ("k6-200", "duron-900")


@pytest.mark.parametrize("over", [dict(max=10_000),            # beyond the knob's max
                                  dict(min=0),                 # below the knob's min
                                  dict(min=100),               # default 64 outside the slider
                                  dict(value=0), dict(value=300), dict(value="many")])
def test_overrides_cannot_leave_the_knob_range(over):
    with pytest.raises(KnobError) as ei:
        control_for(ping.KNOBS["ping_ttl"], **over)
    assert ei.value.knob == "ping_ttl"


def test_bad_choice_override_is_rejected():
    with pytest.raises(KnobError):
        control_for(ping.KNOBS["cpu"], options=("k6-200", "pentium-pro"))


def test_derived_default_needs_a_start_value():
    with pytest.raises(KnobError):
        control_for(SYSCTLS["gc_thresh"])
    assert control_for(SYSCTLS["gc_thresh"], value=256, max=4096).value == 256


# -- the Explorer with a toy model ------------------------------------------------------

def _toy():
    a = Knob("a", 3, int, 0, 10, "units", "toy a")
    b = Knob("b", "x", str, choices=("x", "y", "boom"), help="toy b")
    fig, ax = new_figure(title="toy")
    (line,) = ax.plot([0, 1], [0, 0])

    def update(a, b):
        if b == "boom":
            raise KnobError("b", b, "anything but 'boom'")
        line.set_ydata([0, a])
        ax.set_ylim(0, 11)
        return f"a is <b>{a}</b>, b is {b}", f"a line rising to {a}"

    return Explorer([control_for(a), control_for(b)], update, fig, dpi=40)


def test_explorer_update_changes_readout_and_image():
    e = _toy()
    assert READOUT_CLASS in e.readout._dom_classes
    assert e.png.startswith(PNG_SIGNATURE) and e.readout_text == "a is 3, b is x"
    before = e.png
    dt = e.update(a=7)
    assert isinstance(dt, float) and dt >= 0
    assert e.readout_text == "a is 7, b is x" and e.png != before
    assert e.values == {"a": 7, "b": "x"} and e.alt == "a line rising to 7"
    assert "a line rising to 7" in e.description.value


def test_explorer_image_lives_in_an_output_widget():
    e = _toy()
    (out,) = e.output.outputs
    assert out["data"]["application/vnd.jupyter.widget-view+json"]["model_id"] == e.image.model_id
    assert e.output in e.widget.children and e.readout in e.widget.children
    assert "application/vnd.jupyter.widget-view+json" in e._repr_mimebundle_()


def test_explorer_reacts_to_widget_changes_like_a_browser():
    e = _toy()
    e.controls["a"].value = 9
    assert e.readout_text.startswith("a is 9")


def test_explorer_errors_become_messages_not_tracebacks():
    e = _toy()
    good = e.png
    e.update(b="boom")
    assert e.readout_text.startswith("⚠ b = 'boom' does not work here")
    assert e.last_error and e.png == good
    e.update(b="y")
    assert e.last_error is None and e.readout_text == "a is 3, b is y"
    e.update(nope=1)
    assert "one of the controls: a, b" in e.readout_text
    e.update(b="not-an-option")
    assert e.readout_text.startswith("⚠ b = 'not-an-option'")


def test_explorer_unexpected_error_is_friendly():
    fig = Figure()

    def broken(a):
        raise ZeroDivisionError("oops")

    e = Explorer([control_for(Knob("a", 1, int, 0, 5))], broken, fig)
    assert "Something unexpected went wrong (ZeroDivisionError: oops)" in e.readout_text


# -- notebook 00's explorer -------------------------------------------------------------

@pytest.fixture(scope="module")
def nb00():
    return packet_journey_explorer()


def test_packet_journey_explorer_controls(nb00):
    assert EXPLORERS["00-packet-journey"] is packet_journey_explorer
    assert set(nb00.controls) == {"ping_size", "ping_ttl", "ping_df", "mtu", "background_pps",
                                  "cpu"}
    assert "k6-200" in nb00.readout_text and "RTT p50" in nb00.readout_text


@pytest.mark.parametrize("change", [dict(ping_ttl=255), dict(ping_size=4000), dict(mtu=9000),
                                    dict(background_pps=6000), dict(cpu="p4-xeon-2400x2"),
                                    dict(ping_df=True)])
def test_every_control_changes_readout_and_figure(nb00, change):
    before_text, before_png = nb00.readout_text, nb00.png
    nb00.update(**change)
    assert nb00.last_error is None
    assert nb00.readout_text != before_text
    assert nb00.png != before_png and nb00.png.startswith(PNG_SIGNATURE)


def test_explorer_explains_lost_pings(nb00):
    nb00.update(ping_ttl=1, ping_df=False)
    assert "no replies" in nb00.readout_text and "TTL expired" in nb00.readout_text
    nb00.update(ping_ttl=64, ping_df=True, ping_size=4000, mtu=1500)
    assert "DF set and 4000 B > MTU 1500" in nb00.readout_text
    nb00.update(ping_df=False)
    assert "3 frames" in nb00.readout_text


def test_cached_background_render_matches_a_full_draw():
    res = ping.run(seed=1, duration=2.0)
    pf = ping_journey_figure(res)
    for _ in range(2):   # the second render restores the cached background
        fast = np.asarray(Image.open(io.BytesIO(pf.render_png(dpi=60))).convert("RGB"))
    pf.fig.set_dpi(60)
    full = np.asarray(Image.open(io.BytesIO(png_bytes(pf.fig, dpi=60))).convert("RGB"))
    assert fast.shape == full.shape
    assert np.mean(np.any(fast != full, axis=-1)) < 0.002


# -- figures ----------------------------------------------------------------------------

def test_new_figure_and_palette():
    fig, axes = new_figure(1, 2, title="t")
    assert isinstance(fig, Figure) and len(axes) == 2
    (line,) = axes[0].plot([0, 1], [0, 1])
    assert line.get_color() == OKABE_ITO["blue"]
    assert png_bytes(fig, dpi=30).startswith(PNG_SIGNATURE)


def test_nice_ceiling():
    assert [nice_ceiling(x) for x in (0.2, 1.0, 1.3, 4.9, 7, 11, 460)] == [1, 1, 2, 5, 10, 20, 500]


def test_show_puts_the_alt_text_on_the_img_and_in_the_text(monkeypatch):
    seen = {}

    def fake_display(obj, raw=False, metadata=None):
        seen.update(obj=obj, raw=raw, metadata=metadata)

    import IPython.display
    monkeypatch.setattr(IPython.display, "display", fake_display)
    fig, _ax = new_figure(title="x")
    show(fig, alt='A flat line at "zero" <ms>.', dpi=30)
    assert seen["raw"] and set(seen["obj"]) == {"text/html", "text/plain"}
    page = seen["obj"]["text/html"]
    m = re.fullmatch(r'<img alt="([^"]*)" width="(\d+)" style="[^"]*" '
                     r'src="data:image/png;base64,([A-Za-z0-9+/=]+)">', page)
    assert m, page
    assert html.unescape(m.group(1)) == 'A flat line at "zero" <ms>.'
    assert int(m.group(2)) == round(fig.get_size_inches()[0] * 30)
    assert base64.b64decode(m.group(3)).startswith(PNG_SIGNATURE)
    assert seen["obj"]["text/plain"] == '[figure] A flat line at "zero" <ms>.'
    with pytest.raises(ValueError):
        show(fig, alt="  ")


def test_img_html_needs_alt_text():
    with pytest.raises(ValueError):
        img_html(PNG_SIGNATURE, "")
    assert 'alt="x &amp; y"' in img_html(PNG_SIGNATURE, " x & y ")


def test_explorer_figure_is_an_img_with_the_current_alt_text():
    e = _toy()
    m = re.search(r'<img alt="([^"]*)"[^>]* src="data:image/png;base64,([^"]+)">', e.image.value)
    assert m and m.group(1) == "a line rising to 3"
    assert base64.b64decode(m.group(2)) == e.png
    e.update(a=5)
    assert 'alt="a line rising to 5"' in e.image.value


def test_explorer_without_alt_text_still_describes_its_img():
    fig, ax = new_figure()
    e = Explorer([control_for(Knob("a", 1, int, 0, 5))], lambda a: f"a = {a}", fig, dpi=30,
                 title="toy")
    assert re.search(r'<img alt="Figure of the explorer [^"]*a = 1"', e.image.value)


def test_ping_series_counts_dropped_requests_as_lost():
    res = ping.run(seed=1, duration=1.0, ping_ttl=1)
    sent, rtt = ping_series(res)
    assert sent.size == 10 and np.isnan(rtt).all()
    res = ping.run(seed=1, duration=1.0)
    sent, rtt = ping_series(res)
    assert sent.size == 10 and np.isfinite(rtt).all()


def test_ping_figure_alt_text_describes_the_data():
    pf = ping_journey_figure(ping.run(seed=1, duration=2.0))
    assert isinstance(pf, PingJourneyFigure)
    assert "median" in pf.alt and "µs of CPU" in pf.alt and "k6-200" in pf.alt


# -- answer checks (the building blocks; the checker itself: test_answers.py) ----------------

def test_number_right_and_wrong():
    ok, text = number_feedback(3, 3, unit="fragments")
    assert ok and text.startswith("✓ Right: you said 3 fragments")
    ok, text = number_feedback(2, 3, unit="fragments", hint="count the payload",
                               explanation="1480-byte chunks")
    assert not ok and text.startswith("✗") and "too low" in text and "Hint: count" in text
    assert "Why: 1480" in text
    ok, text = number_feedback(0.45, 0.41, rel=0.15, unit="ms")
    assert ok and "±15%, i.e. ±0.0615 ms" in text
    ok, text = number_feedback(6000, 6216.95, rel=0.1, unit="misses/s")
    assert ok and "the model gives 6,217 misses/s" in text and "±621.7 misses/s" in text


@pytest.mark.parametrize("bad", ["three", [3], {"a": 1}, True, float("nan")])
def test_number_wrong_type_says_what_was_expected(bad):
    ok, text = number_feedback(bad, 3, unit="fragments", hint="h", explanation="e")
    assert not ok and "Expected a number in fragments" in text
    assert "Hint" not in text and "Why" not in text and "3 fragments" not in text


def test_number_as_text_and_missing():
    assert number_feedback("3", 3)[0]
    assert number_feedback(" 0.41 ms", 0.41, tol=0.01)[0]
    for missing in (None, ...):
        ok, text = number_feedback(missing, 3, name="n_frags", hint="h", explanation="e")
        assert not ok and text.startswith("… Write your prediction first: set n_frags")
        assert "3" not in text and "Hint" not in text and "Why" not in text


def test_choice_feedback():
    choices = ["about the same", "about twice as long"]
    assert choice_feedback("About  the same", "about the same", choices)[0]
    assert choice_feedback("a", "about the same", choices)[0]
    ok, text = choice_feedback("b", "about the same", choices, hint="h", explanation="e")
    assert not ok and "you chose \"about twice as long\"" in text and "Why: e" in text
    ok, text = choice_feedback("maybe", "about the same", choices)
    assert not ok and "not one of the choices" in text and "a) about the same" in text
    ok, text = choice_feedback(2, "about the same", choices)
    assert not ok and "Expected one of the choices as text" in text
    with pytest.raises(ValueError):
        choice_feedback("a", "never", choices)


def test_say_shows_markdown_with_the_same_plain_text(monkeypatch):
    seen = {}
    import IPython.display
    monkeypatch.setattr(IPython.display, "display",
                        lambda obj, raw=False: seen.update(obj=obj, raw=raw))
    assert say("""
        The cache holds **4,096** entries.
        """) is None
    assert seen["raw"] and seen["obj"] == {"text/markdown": "The cache holds **4,096** entries.",
                                           "text/plain": "The cache holds **4,096** entries."}
    with pytest.raises(ValueError):
        say("  ")
