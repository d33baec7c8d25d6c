"""The session's GPU account over a run: the sync watch patches torch only while a stage epoch is
open (started by the first, stopped with the last, a nested validation included), so nothing is
wrapped between windows or after the run; the FLOP counter's one-off import is paid when the
session is made, not in the first step. CUDA is faked at the account's one door to it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

import perfkit
import perfkit.torch
from perfkit.monitor import Options, Session
from perfkit.monitor._device import DeviceAccount


class Watch:
    def __init__(self) -> None:
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True


@pytest.fixture
def watches(monkeypatch: pytest.MonkeyPatch) -> list[Watch]:
    made: list[Watch] = []

    def watch_syncs(registry: perfkit.Registry) -> Watch:
        made.append(Watch())
        return made[-1]

    cuda = SimpleNamespace(cuda=SimpleNamespace(is_available=lambda: True))
    monkeypatch.setattr(perfkit.torch, "watch_syncs", watch_syncs)
    monkeypatch.setattr(DeviceAccount, "_cuda", staticmethod(lambda: cuda))
    return made


def session() -> Session:
    options = Options(registry=perfkit.Registry(), console=False, sample_resources=False, flops_per_step=1e9)
    return Session(options)


def test_the_sync_watch_runs_only_while_a_stage_epoch_is_open(watches: list[Watch]) -> None:
    s = session()
    s.begin("train", 0)
    s.begin("val", 0)  # a validation inside the training epoch
    s.end("val")
    assert [w.stopped for w in watches] == [False]
    s.end("train")
    assert [w.stopped for w in watches] == [True]
    s.begin("train", 1)
    assert [w.stopped for w in watches] == [True, False]
    s.close()  # an interrupted fit: the open watch stops too
    assert [w.stopped for w in watches] == [True, True]


FIRST_STEP = """
import json, sys, time
import torch
import perfkit
from perfkit.monitor import Options, Session
assert "torch._dynamo" not in sys.modules
t0 = time.perf_counter()
s = Session(Options(registry=perfkit.Registry(), console=False, sample_resources=False, peak_tflops=1.0))
made = time.perf_counter() - t0
a = torch.randn(64, 64)
s.begin("train", 0)
t0 = time.perf_counter()
s.recorder.step_begin("train")
a @ a
s.recorder.step_end("train")  # the first step: its FLOPs counted
step = time.perf_counter() - t0
s.end("train")
print(json.dumps({"made_s": made, "first_step_s": step}))
"""


def test_the_flop_counters_import_is_paid_when_the_session_is_made() -> None:
    """In a fresh process: FlopCounterMode's first use imports torch._dynamo (a second here)."""
    out = subprocess.run([sys.executable, "-c", FIRST_STEP], capture_output=True, text=True, check=True)
    times = json.loads(out.stdout.splitlines()[-1])
    assert times["first_step_s"] < times["made_s"] / 4, times


class HostEvent:
    """A ``torch.cuda.Event`` faked on a device that runs everything the moment it is queued: an
    event is reached when the host records it, so each part's GPU time is its host time."""

    def record(self) -> None:
        self.at = time.perf_counter_ns()

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: HostEvent) -> float:
        return (end.at - self.at) / 1e6


def test_a_plain_loops_parts_get_their_gpu_time_from_one_step_in_ten() -> None:
    """Events at every change of part, through the session a plain ``perfkit.window`` builds, on
    steps 1 and 11 of 20 (``DeviceParts.EVERY``): every part has its GPU time, scaled to the
    epoch by the steps over the steps timed (on this faked device, with no queue, a part's GPU
    time is its host time)."""
    import torch

    reg = perfkit.Registry(gpu_events=HostEvent)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with perfkit.window("train", epoch=0, registry=reg, console=False) as w:
        for x in w.iterate([torch.randn(4, 8)] * 20):
            opt.zero_grad()
            loss = model(x).sum()
            loss.backward()
            opt.step()
    assert w.window is not None
    snap, account = w.window.snapshot, w.window.account
    host, gpu = account.subjects["step"], account.subjects["step_gpu"]
    assert set(gpu) == set(host) == {"forward", "backward", "optimizer", "zero_grad", "rest"}
    timed = snap["train.step.gpu"]
    assert timed.count == 2
    assert sum(gpu.values()) == pytest.approx(timed.total_s * 20 / 2, rel=1e-6)
