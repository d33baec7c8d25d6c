"""watch_syncs: each synchronizing call's site, count and the host's blocked time.

The CUDA boundary is faked at the seam ``SyncWatch(torch=...)`` (tests/torch/fake_cuda): a tensor
"on the device" waits on a fake clock and, in the sync debug mode, warns as torch's C++ does.
The real thing runs in the GPU check (``make gpu-check``) and tests/gpu.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Iterator

import pytest

import perfkit
from perfkit.resources import stall_sites
from perfkit.torch._syncs import SyncWatch
from tests.torch import fake_cuda
from tests.torch.fake_cuda import WAIT_NS, Tensor

HERE = "tests/torch/test_syncs.py"


@pytest.fixture
def reg() -> perfkit.Registry:
    return perfkit.Registry(clock=fake_cuda.clock)


@pytest.fixture
def watch(reg: perfkit.Registry) -> Iterator[SyncWatch]:
    fake_cuda.mode.update(value=0, set=[])
    w = SyncWatch(reg, torch=fake_cuda)  # type: ignore[arg-type]
    assert w.start(), w.reason
    yield w
    w.stop()


def line() -> int:
    """The caller's line number."""
    frame = inspect.currentframe()
    assert frame is not None
    assert frame.f_back is not None
    return frame.f_back.f_lineno


def test_a_blocking_item_is_timed_at_the_line_that_called_it(reg: perfkit.Registry, watch: SyncWatch) -> None:
    t = Tensor()
    where = line() + 2
    for _ in range(3):
        t.item()
    sites = stall_sites(reg.snapshot())
    assert [(s.site, s.count, s.timed) for s in sites] == [(f"{HERE}:{where}", 3, True)]
    assert sites[0].total_s == pytest.approx(3 * WAIT_NS / 1e9)


def test_calls_that_do_not_wait_record_nothing(reg: perfkit.Registry, watch: SyncWatch) -> None:
    Tensor(on_device=False).item()
    Tensor().to("cuda", non_blocking=True)
    assert stall_sites(reg.snapshot()) == []


def test_each_wrapped_entry_point_is_timed_once(reg: perfkit.Registry, watch: SyncWatch) -> None:
    t = Tensor()
    t.cpu()
    t.tolist()  # calls item() inside: one stall, not two
    t.to("cpu")
    if t:
        pass
    int(t)
    float(t)
    fake_cuda.nonzero(t)
    fake_cuda.cuda.synchronize()  # explicit: always a stall, though the debug mode says nothing
    sites = stall_sites(reg.snapshot())
    assert sum(s.count for s in sites) == 8
    assert all(s.timed and s.mean_s == pytest.approx(WAIT_NS / 1e9) for s in sites)


def test_a_sync_through_an_entry_point_not_wrapped_is_counted_untimed(
    reg: perfkit.Registry, watch: SyncWatch
) -> None:
    where = line() + 1
    fake_cuda.unique(Tensor())
    (site,) = stall_sites(reg.snapshot())
    assert (site.site, site.count, site.timed, site.total_s) == (f"{HERE}:{where}", 1, False, 0.0)


def test_stalls_nest_in_the_open_section(reg: perfkit.Registry, watch: SyncWatch) -> None:
    with perfkit.section("step", registry=reg):
        Tensor().item()
    paths = [path for path in reg.snapshot().tree if path[-1].startswith("sync.stall.")]
    assert [p[:-1] for p in paths] == [("step",)]


def test_under_w_error_a_sync_is_recorded_not_raised(reg: perfkit.Registry) -> None:
    fake_cuda.mode.update(value=0, set=[])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pytest -W error
        with SyncWatch(reg, torch=fake_cuda):  # type: ignore[arg-type]
            Tensor().item()
            fake_cuda.unique(Tensor())
    assert sorted(s.timed for s in stall_sites(reg.snapshot())) == [False, True]


def test_the_users_warnings_reach_their_handler(reg: perfkit.Registry) -> None:
    fake_cuda.mode.update(value=0, set=[])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with SyncWatch(reg, torch=fake_cuda):  # type: ignore[arg-type]
            Tensor().item()
            warnings.warn("the user's own", UserWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["the user's own"]  # not the prototype notice, no sync


def test_stop_puts_back_what_start_changed(reg: perfkit.Registry) -> None:
    fake_cuda.mode.update(value=0, set=[])
    before = (dict(vars(Tensor)), fake_cuda.nonzero, fake_cuda.cuda.synchronize, warnings.showwarning)
    filters = list(warnings.filters)
    w = SyncWatch(reg, torch=fake_cuda)  # type: ignore[arg-type]
    w.start()
    assert Tensor.item is not before[0]["item"]
    w.stop()
    assert (dict(vars(Tensor)), fake_cuda.nonzero, fake_cuda.cuda.synchronize, warnings.showwarning) == before
    assert list(warnings.filters) == filters
    assert fake_cuda.mode["set"] == [1, 0]  # "warn" while watching, then the mode it found
    Tensor().item()
    assert stall_sites(reg.snapshot()) == []


def test_one_watch_at_a_time(reg: perfkit.Registry, watch: SyncWatch) -> None:
    second = SyncWatch(reg, torch=fake_cuda)  # type: ignore[arg-type]
    assert not second.start()
    assert second.reason == "another SyncWatch is watching this process"


def test_disabled_perfkit_records_no_stall(reg: perfkit.Registry, watch: SyncWatch) -> None:
    perfkit.disable()
    try:
        Tensor().item()
        fake_cuda.unique(Tensor())
    finally:
        perfkit.enable()
    assert stall_sites(reg.snapshot()) == []


def test_without_cuda_nothing_is_patched_and_the_reason_is_given() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: tests/gpu covers it")
    item = torch.Tensor.item
    with perfkit.torch.watch_syncs() as w:
        assert torch.Tensor.item is item
    assert not w.active
    assert w.reason == "CUDA is not available: nothing synchronizes with a device"
