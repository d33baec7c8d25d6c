"""The device peak table and MFU: names as torch spells them, sources, abstentions, stated peaks."""

from __future__ import annotations

import pytest

from perfkit.resources import PEAKS, device_peak, mfu, mixed_peak, step_mfu

# torch.cuda.get_device_name() as drivers report it, and the entry each must find
NAMES = {
    "NVIDIA H100 80GB HBM3": "H100 SXM",
    "NVIDIA H100 PCIe": "H100 PCIe",
    "NVIDIA H200": "H200 SXM",
    "NVIDIA A100-SXM4-80GB": "A100",
    "NVIDIA A100-SXM4-40GB": "A100",
    "NVIDIA A100-PCIE-40GB": "A100",
    "NVIDIA A100 80GB PCIe": "A100",
    "NVIDIA A10": "A10",
    "NVIDIA A40": "A40",
    "NVIDIA L4": "L4",
    "NVIDIA L40": "L40",
    "NVIDIA L40S": "L40S",
    "NVIDIA GeForce RTX 4090": "GeForce RTX 4090",
    "Tesla V100-SXM2-16GB": "V100 SXM2",
    "Tesla V100-SXM2-32GB": "V100 SXM2",
    "Tesla V100-PCIE-16GB": "V100 PCIe",
    "Tesla T4": "T4",
}

# names of parts the table does not hold, which must not borrow a neighbour's figures
NOT_HELD = [
    "NVIDIA H100 NVL",
    "NVIDIA H200 NVL",
    "NVIDIA GH200 480GB",
    "NVIDIA A10G",
    "NVIDIA GeForce RTX 4090 D",
    "NVIDIA GeForce RTX 4090 Laptop GPU",
    "Tesla V100S-PCIE-32GB",
    "NVIDIA GeForce RTX 3090",
    "NVIDIA H800",
]


@pytest.mark.parametrize(("name", "device"), NAMES.items())
def test_each_name_torch_reports_finds_its_device(name: str, device: str) -> None:
    peak = device_peak(name, "fp32")
    assert peak.device == device
    assert peak.tflops is not None
    assert peak.source.startswith("NVIDIA")


@pytest.mark.parametrize("name", NOT_HELD)
def test_a_part_the_table_does_not_hold_abstains_saying_so(name: str) -> None:
    peak = device_peak(name, "bf16")
    assert peak.tflops is None
    assert "not in perfkit's peak table" in peak.reason
    assert "peak_tflops=" in peak.reason


def test_every_entry_names_its_vendor_source_and_dense_figures_in_order() -> None:
    for entry in PEAKS:
        assert entry.source.startswith("NVIDIA"), entry.device
        assert set(entry.tflops) <= {"fp32", "tf32", "bf16", "fp16", "fp8"}
        assert all(v > 0 for v in entry.tflops.values())
        lanes = [entry.tflops[k] for k in ("fp32", "tf32", "bf16", "fp8") if k in entry.tflops]
        assert lanes == sorted(lanes), f"{entry.device}: a narrower dtype must not be slower"


def test_the_h200_measured_today_sits_under_its_peak() -> None:
    # 806 TFLOP/s bf16 and 50 TFLOP/s fp32 were measured on an H200 (8192^3 matmuls): below the
    # dense peaks, as a measurement must be, and not absurdly far (a sparse figure would halve MFU)
    assert 0.6 < 806 / device_peak("NVIDIA H200", "bfloat16").tflops < 1.0  # type: ignore[operator]
    assert 0.6 < 50 / device_peak("NVIDIA H200", "float32").tflops < 1.0  # type: ignore[operator]


def test_a_stated_peak_wins_and_a_bad_one_is_refused() -> None:
    assert device_peak("NVIDIA H100 80GB HBM3", "bf16", peak_tflops=900).tflops == 900.0
    assert device_peak(None, "fp32", peak_tflops=1.5).source == "stated by the user (peak_tflops=)"
    for bad in (0, -1.0, float("nan"), float("inf"), True, "989"):
        with pytest.raises(ValueError, match="peak_tflops"):
            device_peak("NVIDIA H100 80GB HBM3", "bf16", peak_tflops=bad)  # type: ignore[arg-type]


def test_without_a_device_or_a_dtype_it_abstains_in_words() -> None:
    assert "no CUDA device" in device_peak(None, "fp32").reason
    assert "no dense int8 peak" in device_peak("NVIDIA L4", "torch.int8").reason
    assert (
        device_peak("Tesla T4", "bf16").reason
        == "T4's datasheet gives no dense bf16 figure: pass peak_tflops="
    )


def test_fp32_matmuls_on_a_device_without_tf32_use_its_fp32_peak() -> None:
    peak = device_peak("Tesla V100-PCIE-16GB", "tf32")
    assert (peak.tflops, peak.dtype) == (14.0, "fp32")
    assert "no TF32" in peak.notes[0]


def test_a_mix_of_dtypes_is_judged_at_the_peak_of_its_mix() -> None:
    peak = mixed_peak({"bf16": 3e12, "fp32": 1e12}, "NVIDIA L4")
    # 4e12 FLOPs take 3e12/121e12 + 1e12/30.3e12 s at best
    assert peak.tflops == pytest.approx(4 / (3 / 121 + 1 / 30.3))
    assert peak.dtype == "bf16 75% + fp32 25%"
    small = mixed_peak({"bf16": 995.0, "int8": 5.0}, "NVIDIA L4")
    assert small.tflops == pytest.approx(121.0)
    assert "int8" in small.notes[0]
    large = mixed_peak({"bf16": 90.0, "int8": 10.0}, "NVIDIA L4")
    assert large.tflops is None
    assert large.reason.startswith("10% of the FLOPs run in int8")


def test_mfu_abstains_without_flops_steps_or_peak() -> None:
    assert mfu(None, steps=1, seconds=1.0, peak=10.0).fraction is None
    assert mfu(1e12, steps=0, seconds=0.0, peak=10.0).reason == "no step was timed"
    unknown = mfu(1e12, steps=1, seconds=1.0, peak=device_peak("NVIDIA A10G", "bf16"))
    assert unknown.fraction is None
    assert unknown.achieved_tflops == 1.0
    assert "A10G" in unknown.line


def test_step_mfu_reads_a_windows_steps() -> None:
    import perfkit

    reg = perfkit.Registry()
    for _ in range(4):
        reg.record("val.step", 0, 250_000_000)
    assert step_mfu(reg.snapshot(), "val", 1e12, peak=4.0).fraction == pytest.approx(1.0)
    assert step_mfu(reg.snapshot(), "train", 1e12, peak=4.0).reason == "no step was timed"
