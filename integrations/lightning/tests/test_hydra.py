"""The packaged Hydra configs: found through the search-path plugin, composed with overrides, instantiated."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from perfkit_lightning import (
    PerfMonitor,
    PerformanceProfilerCallback,
    ProfilerCallback,
    ThroughputMonitorCallback,
)

APP = """\
defaults:
  - callbacks: [perf_monitor, performance_profiler, throughput_monitor, profiler]
  - _self_
"""


@pytest.fixture
def app(tmp_path: Path) -> Path:
    """A user's Hydra app that names perfkit-lightning's configs without shipping them."""
    (tmp_path / "app.yaml").write_text(APP)
    return tmp_path


def compose_app(app: Path, overrides: list[str]) -> object:
    with initialize_config_dir(config_dir=str(app), version_base="1.3"):
        return compose("app", overrides=overrides)


def test_every_callback_config_instantiates_with_its_defaults(app: Path) -> None:
    cfg = compose_app(app, [])
    callbacks = {name: instantiate(node) for name, node in cfg.callbacks.items()}  # type: ignore[attr-defined]
    assert isinstance(callbacks["perf_monitor"], PerfMonitor)
    assert callbacks["perf_monitor"].phases == ("train", "val", "test", "predict")
    assert isinstance(callbacks["performance_profiler"], PerformanceProfilerCallback)
    assert callbacks["performance_profiler"].log_interval == 10
    assert isinstance(callbacks["throughput_monitor"], ThroughputMonitorCallback)
    assert isinstance(callbacks["profiler"], ProfilerCallback)


def test_the_seed_profiler_overrides_work(app: Path) -> None:
    cfg = compose_app(app, ["callbacks.profiler.enabled=true", "callbacks.profiler.profile_epochs=[1,2]"])
    profiler = instantiate(cfg.callbacks.profiler)  # type: ignore[attr-defined]
    assert profiler.enabled is True
    assert profiler.profile_epochs == frozenset({1, 2})


def test_command_line_overrides_reach_the_callbacks(app: Path) -> None:
    cfg = compose_app(
        app,
        [
            "callbacks.perf_monitor.enabled=false",
            "callbacks.perf_monitor.phases=[val]",
            "callbacks.performance_profiler.verbose=true",
            "callbacks.throughput_monitor.log_interval=5",
        ],
    )
    monitor = instantiate(cfg.callbacks.perf_monitor)  # type: ignore[attr-defined]
    assert (monitor.enabled, monitor.phases) == (False, ("val",))
    assert instantiate(cfg.callbacks.performance_profiler).verbose is True  # type: ignore[attr-defined]
    assert instantiate(cfg.callbacks.throughput_monitor).log_interval == 5  # type: ignore[attr-defined]


def test_selecting_one_callback_from_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "app.yaml").write_text("defaults:\n  - _self_\n")
    cfg = compose_app(tmp_path, ["+callbacks=perf_monitor", "callbacks.perf_monitor.console=true"])
    assert list(cfg.callbacks) == ["perf_monitor"]  # type: ignore[attr-defined]
    assert instantiate(cfg.callbacks.perf_monitor).console is True  # type: ignore[attr-defined]


def test_configs_list_every_constructor_argument() -> None:
    import inspect

    import yaml

    conf = Path(inspect.getfile(PerfMonitor)).parent / "conf" / "callbacks"
    for file, cls in [
        ("perf_monitor.yaml", PerfMonitor),
        ("performance_profiler.yaml", PerformanceProfilerCallback),
        ("throughput_monitor.yaml", ThroughputMonitorCallback),
        ("profiler.yaml", ProfilerCallback),
    ]:
        (node,) = yaml.safe_load((conf / file).read_text()).values()
        params = inspect.signature(cls.__init__).parameters
        assert set(node) - {"_target_"} == set(params) - {"self"}, file
        for name, value in node.items():
            if name != "_target_" and not isinstance(params[name].default, tuple):
                assert value == params[name].default, (file, name)
