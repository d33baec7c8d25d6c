"""Each step part's GPU time, by events where the host moves from part to part, on a faked device.

The device is faked at ``torch.cuda.Event`` only: a stream that runs each kernel the test
launches for the time the test says, after the host has queued it and after the kernels before
it. An event is reached when the stream has run everything queued before it. The test keeps its
own ledger of each part's kernels (the truth); perfkit sees only the events.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

import perfkit
from perfkit.stages import DeviceParts, StageRecorder, stage_metrics
from tests.conftest import FakeClock

MS = 1_000_000


class Stream:
    """The faked device: one stream, its time in ns, and what each part's kernels took."""

    def __init__(self, host: FakeClock) -> None:
        self.host = host
        self.busy_until = 0
        self.ledger: defaultdict[str, int] = defaultdict(int)

    def launch(self, part: str, ms: float) -> None:
        """The host queues a kernel of ``ms`` (the host moves on at once)."""
        start = max(self.busy_until, self.host())
        self.busy_until = start + round(ms * MS)
        self.ledger[part] += round(ms * MS)

    def event(self) -> Event:
        return Event(self)


class Event:
    """A ``torch.cuda.Event`` on the faked stream: reached once the kernels queued before it ran."""

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self.at = 0

    def record(self) -> None:
        self.at = max(self.stream.busy_until, self.stream.host())

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: Event) -> float:
        return (end.at - self.at) / MS  # in ms, as torch gives it


def recorder(clock: FakeClock, stream: Stream, **kw: object) -> tuple[perfkit.Registry, StageRecorder]:
    reg = perfkit.Registry(clock=clock)
    return reg, StageRecorder(reg, top_k_slowest=0, device=DeviceParts(reg, stream.event, every=1, **kw))  # type: ignore[arg-type]


def gpu_parts(rec: StageRecorder) -> dict[str, float]:
    w = rec.end("train")
    assert w is not None
    return {p: round(s * 1e3, 3) for p, s in w.account.subjects.get("step_gpu", {}).items()}


def test_each_parts_gpu_time_is_the_time_its_kernels_ran(clock: FakeClock) -> None:
    """A GPU-bound step: the host queues forward's 5 ms, backward's 10 ms and the optimizer's 2 ms
    in microseconds; each part's GPU time is its kernels', not the host's microseconds."""
    stream = Stream(clock)
    _, rec = recorder(clock, stream)
    rec.begin("train", 0)
    for _ in range(4):
        rec.step_begin("train")
        stream.launch("forward", 5)
        clock.advance(20_000)
        rec.part_begin("backward")
        stream.launch("backward", 10)
        clock.advance(20_000)
        rec.part_end("backward")
        rec.part_begin("optimizer")
        stream.launch("optimizer", 2)
        clock.advance(20_000)
        rec.part_end("optimizer")
        rec.step_end("train")
    assert gpu_parts(rec) == {p: ns / 1e6 for p, ns in stream.ledger.items()}


def test_a_closure_inside_the_optimizer_step_is_counted_once(clock: FakeClock) -> None:
    """Lightning's closure runs backward inside the optimizer's step: backward's kernels are
    backward's, and the optimizer keeps only its own."""
    stream = Stream(clock)
    _, rec = recorder(clock, stream)
    rec.begin("train", 0)
    rec.step_begin("train")
    rec.part_begin("optimizer")
    rec.part_begin("forward")
    stream.launch("forward", 3)
    rec.part_end("forward")
    rec.part_begin("backward")
    stream.launch("backward", 6)
    rec.part_end("backward")
    stream.launch("optimizer", 1)
    clock.advance(10_000)
    rec.part_end("optimizer")
    rec.step_end("train")
    assert gpu_parts(rec) == {"forward": 3.0, "backward": 6.0, "optimizer": 1.0}


def test_a_launch_bound_part_reads_its_host_time(clock: FakeClock) -> None:
    """Kernels shorter than the host takes to queue them: the device waits on the host, and the
    part's GPU time is the stretch the host spent queueing (the idle gaps included)."""
    stream = Stream(clock)
    _, rec = recorder(clock, stream)
    rec.begin("train", 0)
    rec.step_begin("train")
    for _ in range(100):  # 100 kernels of 10 µs, one queued every 50 µs
        stream.launch("forward", 0.01)
        clock.advance(50_000)
    rec.part_begin("backward")
    rec.part_end("backward")
    rec.step_end("train")
    assert gpu_parts(rec)["forward"] == pytest.approx(5.0, abs=0.06)


def test_the_gpu_parts_are_metrics(clock: FakeClock) -> None:
    stream = Stream(clock)
    _, rec = recorder(clock, stream)
    rec.begin("train", 0)
    rec.step_begin("train")
    stream.launch("forward", 4)
    rec.part_begin("backward")
    stream.launch("backward", 8)
    rec.part_end("backward")
    rec.step_end("train")
    w = rec.end("train")
    assert w is not None
    metrics = stage_metrics(w)
    assert metrics["perf/train/time/step_gpu/forward_s"] == pytest.approx(0.004)
    assert metrics["perf/train/time/step_gpu/backward_s"] == pytest.approx(0.008)


def test_nothing_is_timed_before_the_program_uses_the_gpu(clock: FakeClock) -> None:
    """``ready`` (``torch.cuda.is_initialized``) false: no event, so no CUDA context for a
    program that never asked for one."""
    stream = Stream(clock)
    made: list[Event] = []

    def events() -> Event:
        made.append(stream.event())
        return made[-1]

    reg = perfkit.Registry(clock=clock)
    rec = StageRecorder(reg, device=DeviceParts(reg, events, ready=lambda: False, every=1))  # type: ignore[arg-type]
    rec.begin("train", 0)
    rec.step_begin("train")
    rec.part_begin("backward")
    rec.part_end("backward")
    rec.step_end("train")
    assert made == []
    assert gpu_parts(rec) == {}


def test_an_event_that_fails_turns_the_device_timing_off_once_and_training_goes_on(clock: FakeClock) -> None:
    def broken() -> Event:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    reg = perfkit.Registry(clock=clock)
    device = DeviceParts(reg, broken, every=1)  # type: ignore[arg-type]
    rec = StageRecorder(reg, device=device)
    rec.begin("train", 0)
    with pytest.warns(perfkit.PerfkitWarning, match="timing the step's parts on the GPU failed") as said:
        for _ in range(3):
            rec.step_begin("train")
            rec.part_begin("backward")
            rec.part_end("backward")
            assert rec.step_end("train") is not None
    assert len(said) == 1
    assert device.lost == 1
    assert gpu_parts(rec) == {}


def test_bad_arguments_are_refused_naming_them() -> None:
    with pytest.raises(TypeError, match="events must be a callable"):
        DeviceParts(perfkit.Registry(), None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="every must be"):
        DeviceParts(perfkit.Registry(), Event, every=0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="device must be a perfkit.stages.DeviceParts"):
        StageRecorder(perfkit.Registry(), device=object())  # type: ignore[arg-type]


def test_one_step_in_every_is_timed_and_the_epoch_is_scaled_to_all(clock: FakeClock) -> None:
    """``every=3`` over 9 steps: steps 1, 4 and 7 are timed (the first warms up), and the parts'
    GPU time is theirs times 9 / 3; here every step launches the same, so that is the truth."""
    stream = Stream(clock)
    reg = perfkit.Registry(clock=clock)
    rec = StageRecorder(reg, top_k_slowest=0, device=DeviceParts(reg, stream.event, every=3))  # type: ignore[arg-type]
    rec.begin("train", 0)
    for _ in range(9):
        rec.step_begin("train")
        stream.launch("forward", 2)
        rec.part_begin("backward")
        stream.launch("backward", 4)
        rec.part_end("backward")
        rec.step_end("train")
    w = rec.end("train")
    assert w is not None
    assert w.snapshot["train.step.gpu"].count == 3
    assert {p: round(s * 1e3, 3) for p, s in w.account.subjects["step_gpu"].items()} == {
        "forward": 18.0,
        "backward": 36.0,
    }


def test_a_step_whose_stream_starts_capturing_a_graph_goes_untimed(clock: FakeClock) -> None:
    """``ready`` turns false inside the step (a CUDA graph being captured: an event recorded then
    would break the capture): no event is recorded from then on, and the step is not timed."""
    stream = Stream(clock)
    capturing = [False]
    made: list[Event] = []

    def events() -> Event:
        made.append(stream.event())
        return made[-1]

    reg = perfkit.Registry(clock=clock)
    device = DeviceParts(reg, events, ready=lambda: not capturing[0], every=1)  # type: ignore[arg-type]
    rec = StageRecorder(reg, device=device)
    rec.begin("train", 0)
    rec.step_begin("train")
    capturing[0] = True
    rec.part_begin("backward")
    rec.part_end("backward")
    rec.step_end("train")
    assert len(made) == 1  # the step's first event, before the capture began
    assert gpu_parts(rec) == {}
