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

from .tiny import Tiny, trainer

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "examples" / "ocr_dbnet" / "configs"
PRESET_LINES = [
    "callbacks=performance_profiler callbacks.performance_profiler.verbose=true",
    "callbacks.throughput_monitor.enabled=true",
    "callbacks.profiler.enabled=true callbacks.profiler.profile_epochs=[1,2]",
]


def docs_app() -> str:
    """The app config docs/hydra.md tells users to write (its first yaml block)."""
    text = (ROOT / "docs" / "hydra.md").read_text()
    return text.split("```yaml\n", 1)[1].split("```", 1)[0]


APP = docs_app()


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
    assert callbacks["perf_monitor"].stages == ("train", "val", "test", "predict")
    assert isinstance(callbacks["performance_profiler"], PerformanceProfilerCallback)
    assert callbacks["performance_profiler"].log_interval == 10
    assert isinstance(callbacks["throughput_monitor"], ThroughputMonitorCallback)
    assert isinstance(callbacks["profiler"], ProfilerCallback)


@pytest.mark.parametrize("line", PRESET_LINES)
@pytest.mark.parametrize("where", ["docs app", "demo"])
def test_the_presets_override_lines_compose_instantiate_and_fit(
    tmp_path: Path, where: str, line: str
) -> None:
    if where == "docs app":
        (tmp_path / "app.yaml").write_text(APP)
        config_dir, name = tmp_path, "app"
    else:
        config_dir, name = DEMO, "demo"
    with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
        cfg = compose(name, overrides=line.split())
    callbacks = [instantiate(node) for node in cfg.callbacks.values()]
    assert all(hasattr(node, "_target_") for node in cfg.callbacks.values())
    by_type = {type(c).__name__: c for c in callbacks}
    if line.startswith("callbacks=performance_profiler"):
        assert list(by_type) == ["PerformanceProfilerCallback"]
        assert by_type["PerformanceProfilerCallback"].verbose is True
    elif "throughput_monitor" in line:
        assert by_type["ThroughputMonitorCallback"].enabled is True
    else:
        assert by_type["ProfilerCallback"].enabled is True
        assert by_type["ProfilerCallback"].profile_epochs == frozenset({1, 2})
    t = trainer(
        str(tmp_path), callbacks, logger=False, max_epochs=1, limit_train_batches=2, limit_val_batches=2
    )
    t.fit(Tiny())
    assert t.current_epoch == 1


def test_command_line_overrides_reach_the_callbacks(app: Path) -> None:
    cfg = compose_app(
        app,
        [
            "callbacks.perf_monitor.enabled=false",
            "callbacks.perf_monitor.stages=[val]",
            "callbacks.profiler.stages=[test]",
            "callbacks.performance_profiler.verbose=true",
            "callbacks.throughput_monitor.log_interval=5",
        ],
    )
    monitor = instantiate(cfg.callbacks.perf_monitor)  # type: ignore[attr-defined]
    assert (monitor.enabled, monitor.stages) == (False, ("val",))
    assert instantiate(cfg.callbacks.profiler).windows.stages == ("test",)  # type: ignore[attr-defined]
    assert instantiate(cfg.callbacks.performance_profiler).verbose is True  # type: ignore[attr-defined]
    assert instantiate(cfg.callbacks.throughput_monitor).log_interval == 5  # type: ignore[attr-defined]


def test_selecting_one_callback_from_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "app.yaml").write_text("defaults:\n  - _self_\n")
    cfg = compose_app(tmp_path, ["+callbacks=perf_monitor", "callbacks.perf_monitor.console=true"])
    assert list(cfg.callbacks) == ["perf_monitor"]  # type: ignore[attr-defined]
    assert instantiate(cfg.callbacks.perf_monitor).options.console is True  # type: ignore[attr-defined]


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
            if name == "enabled" and file in ("throughput_monitor.yaml", "profiler.yaml"):
                assert value is False, file  # off by default in a Hydra app, as our first users' were
            elif name != "_target_" and not isinstance(params[name].default, tuple):
                assert value == params[name].default, (file, name)
