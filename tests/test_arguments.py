"""Values accepted at construction never crash later (issue 14, item 6).

Each constructor refuses NaN, inf, bools for ints and absurd sizes (with a documented
maximum) at once, and its error names the parameter and the value.
"""

from __future__ import annotations

import math
import time
from typing import Any

import pytest

import perfkit
from perfkit.resources import ResourceSampler
from perfkit.run import RunWriter, read_run
from perfkit.sinks import Background


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (
            lambda: perfkit.Registry(capacity=10**12),
            ValueError,
            r"capacity must be .*10,000,000\], got 1000000000000",
        ),
        (
            lambda: perfkit.Registry(max_series=0),
            ValueError,
            r"max_series must be an int in \[1, .*\], got 0",
        ),
        (lambda: perfkit.Registry(max_series=True), ValueError, r"max_series must be an int .*, got True"),
        (
            lambda: perfkit.Registry(clock=time.perf_counter),
            TypeError,
            "clock\\(\\) must be an int of nanoseconds",
        ),
        (
            lambda: perfkit.Registry(clock=lambda: 2**64),
            ValueError,
            "clock\\(\\) must be within 2\\*\\*61 ns",
        ),
        (
            lambda: perfkit.section(["a"]),
            TypeError,
            r"name must be a non-empty str, got \['a'\] of type list",
        ),
        (lambda: read_run(None), TypeError, "path must be a str or os.PathLike .*, got None"),
        (lambda: RunWriter(None), TypeError, "path must be a str or os.PathLike, got None"),
        (
            lambda: ResourceSampler(interval_s=math.inf),
            ValueError,
            r"interval_s must be a finite number .*, got inf",
        ),
        (
            lambda: ResourceSampler(interval_s=math.nan),
            ValueError,
            r"interval_s must be a finite number .*, got nan",
        ),
        (lambda: ResourceSampler(timeout_s=0), ValueError, r"timeout_s must be a finite number .*, got 0"),
        (lambda: ResourceSampler(sources=5), TypeError, "sources must be a list of sources or names, got 5"),
        (
            lambda: Background("x", queue_size=10**9),
            ValueError,
            r"queue_size must be an int in \[1, 100,000\]",
        ),
        (
            lambda: Background("x", timeout_s=math.nan),
            ValueError,
            "timeout_s must be a finite number .*, got nan",
        ),
    ],
)
def test_core_constructors_refuse_bad_values_naming_parameter_and_value(
    make: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        make()


def test_a_sampler_with_the_longest_interval_still_stops_at_once() -> None:
    sampler = ResourceSampler(3600, registry=perfkit.Registry(), sources=[]).start()
    assert sampler.running  # an interval of inf killed the thread (Event.wait(inf) overflows)
    sampler.stop()
    assert not sampler.running


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"max_trace_mb": math.inf},
            ValueError,
            r"max_trace_mb must be a finite number in \(0, 100,000.0\], got inf",
        ),
        ({"max_trace_mb": math.nan}, ValueError, r"max_trace_mb must be a finite number .*, got nan"),
        ({"repeat": 10**8}, ValueError, r"repeat must be an int in \[1, 1,000\], got 100000000"),
        (
            {"profile_steps": 10**9},
            ValueError,
            r"active \(profile_steps\) must be an int in \[1, 1,000,000\]",
        ),
        ({"output_dir": None}, TypeError, "output_dir must be a non-empty path, got None"),
        (
            {"activities": "cpu"},
            TypeError,
            "activities must be a list such as \\['cpu', 'cuda'\\], got the string",
        ),
        ({"activities": 5}, TypeError, "activities must be a list such as .*, got 5"),
        ({"stages": 5}, TypeError, "stages must be a list of stage names, got 5"),
        ({"epochs": 5}, TypeError, "profile_epochs must be a list of epoch numbers or None, got 5"),
    ],
)
def test_profiler_windows_refuse_bad_values_naming_parameter_and_value(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    pytest.importorskip("torch")
    from perfkit.torch import ProfilerWindows

    with pytest.raises(error, match=message):
        ProfilerWindows(**kwargs)
