"""Chapter 08's exchange rate of labels: reading a learning curve between its points."""

import pytest

from bertbook.comparison import labels_to_match

CURVE = {2: 0.3, 4: 0.4, 8: 0.5, 16: 0.6}


def test_a_measured_point_is_read_exactly_and_between_points_on_a_log_scale():
    assert labels_to_match(CURVE, 0.4) == 4.0
    assert labels_to_match(CURVE, 0.45) == pytest.approx(4 * 2 ** 0.5)
    assert labels_to_match(CURVE, 0.2) == 2.0  # already reached at the first point


def test_an_accuracy_beyond_the_curve_is_not_made_up():
    assert labels_to_match(CURVE, 0.7) is None


def test_a_dip_from_one_draw_does_not_make_more_labels_look_worse():
    dipped = {2: 0.3, 4: 0.5, 8: 0.45, 16: 0.6}
    assert labels_to_match(dipped, 0.5) == 4.0
    assert labels_to_match(dipped, 0.55) == pytest.approx(8 * 2 ** 0.5)
