"""The options every adapter shares are declared once: same names, same defaults, same errors."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest
from perfkit_hf import PerfkitCallback
from perfkit_lightning import PerfMonitor

import perfkit
from perfkit.monitor import Options

SHARED = [f.name for f in dataclasses.fields(Options)]
OWN = {
    PerfMonitor: {"enabled", "include_sanity_check", "attach_report", "trial", "trial_budget_s"},
    PerfkitCallback: set(),
}
ADAPTERS = list(OWN)


def parameters(adapter: type) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(adapter).parameters)


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.__name__)
def test_each_adapter_takes_every_shared_option_with_its_default_and_adds_only_its_own(adapter: type) -> None:
    params = parameters(adapter)
    defaults = {f.name: f.default for f in dataclasses.fields(Options)}
    assert {name: params[name].default for name in SHARED} == defaults
    assert set(params) - set(SHARED) == OWN[adapter]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values())


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.__name__)
def test_each_adapter_keeps_the_options_it_was_given(adapter: type) -> None:
    given: dict[str, Any] = {
        "stages": ["val"],
        "prefix": "p",
        "console": False,
        "run_dir": "runs/x",
        "top_k_slowest": 2,
        "sample_interval_s": 0.5,
        "registry": perfkit.Registry(),
        "interval_steps": 7,
        "merge_timeout_s": 9.0,
    }
    options = adapter(**given).options
    assert options == Options(**given)
    assert options.stages == ("val",)


BAD: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"stages": ["eval"]}, ValueError, "stages: unknown stage 'eval'"),
    ({"stages": "val"}, TypeError, "stages must be a list of stage names, got 'val'"),
    ({"prefix": ""}, ValueError, "prefix must be a non-empty str, got ''"),
    ({"run_dir": 5}, TypeError, "run_dir must be a path or None, got 5"),
    ({"top_k_slowest": -1}, ValueError, "top_k_slowest must be an int >= 0, got -1"),
    ({"batch_size_fn": 3}, TypeError, "batch_size_fn must be callable or None, got 3"),
    ({"sample_interval_s": 0}, ValueError, "sample_interval_s must be a finite number in (0, 3600], got 0"),
    ({"registry": "default"}, TypeError, "registry must be a perfkit.Registry"),
    ({"sinks": [object()]}, TypeError, "has no emit(window, metrics, step) method"),
    ({"intervals": "yes"}, TypeError, "intervals must be True, False, None (long epochs only) or a"),
    ({"interval_steps": 0}, ValueError, "interval_steps must be an int >= 1, got 0"),
    ({"interval_s": -1.0}, ValueError, "interval_s must be a finite number"),
    ({"warmup_steps": -1}, ValueError, "warmup_steps must be an int >= 0, got -1"),
    ({"merge_timeout_s": 0}, ValueError, "merge_timeout_s must be a finite number > 0.0, got 0"),
]


@pytest.mark.parametrize(("kwargs", "error", "message"), BAD, ids=[str(b[0]) for b in BAD])
def test_a_bad_option_is_refused_at_construction_in_the_same_words_everywhere(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    for make in (Options, *ADAPTERS):
        with pytest.raises(error) as caught:
            make(**kwargs)
        assert message in str(caught.value), (make, str(caught.value))
