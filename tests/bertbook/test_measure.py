"""The matmul peak measurement keeps its time budget on a slow multiply and still reads
the rate right."""

import pytest
import torch

import bertbook.measure as measure


@pytest.mark.parametrize("rate, expected_side", [(1e12, 2048), (1e9, 512)])
def test_the_product_shrinks_until_it_fits_the_time_budget(monkeypatch, rate, expected_side):
    """A multiply at 1 GFLOP/s (bf16 on a CPU without AVX-512 ran at about that) would
    spend 100 s on six products of side 2048; the measurement drops to side 512."""
    sides = []

    def fake_seconds(device, dtype, size, count):
        sides.append(size)
        return [2 * size**3 / rate] * count

    monkeypatch.setattr(measure, "_product_seconds", fake_seconds)
    measured = measure.matmul_flops_per_second(torch.device("cpu"), budget_seconds=5.0)
    assert sides == [256, expected_side]
    assert measured == pytest.approx(rate)
    assert 6 * 2 * expected_side**3 / rate <= 5.0


def test_the_real_product_reads_a_positive_rate():
    assert measure.matmul_flops_per_second(torch.device("cpu"), size=256, repeats=1) > 0


def test_native_log_lines_are_silenced_and_stderr_comes_back(capfd):
    """The profiler's own log lines reach file descriptor 2 from C++; inside the context
    they go nowhere, and afterwards stderr works again."""
    import os

    from bertbook.measure import native_logs_silenced

    with native_logs_silenced():
        os.write(2, b"USDT: profiler_start\n")
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"
