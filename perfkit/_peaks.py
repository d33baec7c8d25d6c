"""Dense peak TFLOP/s by device and dtype, from NVIDIA's datasheets: the denominator of MFU.

Each entry is matched on ``torch.cuda.get_device_name()`` and names the vendor document its
figures come from. NVIDIA prints the tensor-core figures of Ampere and later parts *with 2:4
structured sparsity* (an asterisk, "specifications 1/2 lower without sparsity"); a training step
is dense, so the table holds half of each starred figure. ``fp32`` is the CUDA-core (non-tensor)
figure, ``tf32`` a float32 matmul on tensor cores (PyTorch: ``torch.backends.cuda.matmul.allow_tf32``
or a float32 matmul precision other than ``"highest"``), ``bf16`` / ``fp16`` a tensor-core matmul
accumulating in fp32 (what PyTorch's kernels do; GeForce cards run it at half their fp16-accumulate
rate), ``fp8`` a tensor-core fp8 matmul accumulating in fp32.

A device or dtype the table does not hold is not guessed: ``device_peak`` abstains and says why,
and a peak stated by the user (``peak_tflops=``) always wins.

>>> p = device_peak("NVIDIA H100 80GB HBM3", "bfloat16")
>>> p.device, p.tflops
('H100 SXM', 989.5)
>>> device_peak("NVIDIA H100 80GB HBM3", "float64").reason
"no dense float64 peak in perfkit's table (it holds fp32, tf32, bf16, fp16, fp8): pass peak_tflops="
>>> device_peak("NVIDIA GeForce RTX 3060", "bf16").tflops is None
True
>>> device_peak("NVIDIA GeForce RTX 3060", "bf16", peak_tflops=51.2).tflops
51.2
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8")
"""The dtypes the table holds, by the name a peak is looked up with."""

_ALIASES = {
    alias: dtype
    for dtype, aliases in {
        "fp32": ("float32", "float"),
        "tf32": ("tfloat32",),
        "bf16": ("bfloat16",),
        "fp16": ("float16", "half"),
        "fp8": ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"),
    }.items()
    for alias in (dtype, *aliases)
}


@dataclass(frozen=True)
class DevicePeak:
    """One device's dense peaks (TFLOP/s by dtype), the device names it matches, and their source."""

    device: str
    pattern: str
    """A regular expression searched, ignoring case, in ``torch.cuda.get_device_name()``."""
    tflops: Mapping[str, float]
    source: str
    """The vendor document the figures come from, and how they were read from it."""


_HOPPER_SXM = {"fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5, "fp8": 1979.0}

PEAKS: tuple[DevicePeak, ...] = (
    DevicePeak(
        "H100 PCIe",
        r"\bH100\b.*\bPCIE\b",
        {"fp32": 51.0, "tf32": 378.0, "bf16": 756.5, "fp16": 756.5, "fp8": 1513.0},
        "NVIDIA H100 Tensor Core GPU datasheet, H100 PCIe: FP32 51, TF32 756*, BF16/FP16 1,513*, "
        "FP8 3,026* TFLOPS (* with sparsity: halved)",
    ),
    DevicePeak(
        "H100 SXM",
        r"\bH100\b(?!.*\b(PCIE|NVL)\b)",  # "NVIDIA H100 80GB HBM3"; the NVL card is not in the table
        _HOPPER_SXM,
        "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM: FP32 67, TF32 989*, BF16/FP16 1,979*, "
        "FP8 3,958* TFLOPS (* with sparsity: halved)",
    ),
    DevicePeak(
        "H200 SXM",
        r"\bH200\b(?!.*\bNVL\b)",  # "NVIDIA H200"; not GH200, not the H200 NVL
        _HOPPER_SXM,
        "NVIDIA H200 Tensor Core GPU datasheet, H200 SXM: FP32 67, TF32 989*, BF16/FP16 1,979*, "
        "FP8 3,958* TFLOPS (* with sparsity: halved); the H100 SXM's compute with more memory",
    ),
    DevicePeak(
        "A100",
        r"\bA100\b",  # SXM4 and PCIe, 40 and 80 GB: one set of figures
        {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0},
        "NVIDIA A100 Tensor Core GPU datasheet (A100 40GB/80GB, PCIe and SXM alike): FP32 19.5, "
        "TF32 156 (312*), BF16/FP16 312 (624*) TFLOPS",
    ),
    DevicePeak(
        "A40",
        r"\bA40\b",
        {"fp32": 37.4, "tf32": 74.8, "bf16": 149.7},
        "NVIDIA A40 datasheet: FP32 37.4, TF32 74.8 (149.6*), BF16 with FP32 accumulate 149.7 "
        "(299.4*) TFLOPS (fp16 with fp32 accumulate: not read, left out)",
    ),
    DevicePeak(
        "A10",
        r"\bA10\b",  # not the A10G (AWS), whose figures NVIDIA does not publish
        {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "fp16": 125.0},
        "NVIDIA A10 Tensor Core GPU datasheet: FP32 31.2, TF32 62.5 (125*), BF16/FP16 125 (250*) TFLOPS",
    ),
    DevicePeak(
        "L4",
        r"\bL4\b",
        {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0, "fp8": 242.5},
        "NVIDIA L4 Tensor Core GPU datasheet: FP32 30.3, TF32 120*, BF16/FP16 242*, FP8 485* TFLOPS "
        "(* with sparsity: halved)",
    ),
    DevicePeak(
        "L40S",
        r"\bL40S\b",
        {"fp32": 91.6, "tf32": 183.0, "bf16": 362.05, "fp16": 362.05, "fp8": 733.0},
        "NVIDIA L40S datasheet: FP32 91.6, TF32 183 (366*), BF16/FP16 362.05 (733*), FP8 733 (1,466*) TFLOPS",
    ),
    DevicePeak(
        "L40",
        r"\bL40\b",
        {"fp32": 90.5, "tf32": 90.5, "bf16": 181.05, "fp16": 181.05, "fp8": 362.0},
        "NVIDIA L40 datasheet: FP32 90.5, TF32 90.5 (181*), BF16/FP16 181.05 (362.1*), FP8 362 (724*) TFLOPS",
    ),
    DevicePeak(
        "GeForce RTX 4090",
        r"\bRTX 4090\b(?!.*\b(D|LAPTOP)\b)",  # not the 4090 D, not the laptop part
        {"fp32": 82.6, "tf32": 82.6, "bf16": 165.2, "fp16": 165.2, "fp8": 330.3},
        "NVIDIA Ada Lovelace GPU architecture whitepaper, GeForce RTX 4090: FP32 82.6; tensor TFLOPS "
        "with FP32 accumulate: TF32 82.6, BF16/FP16 165.2, FP8 330.3 (dense)",
    ),
    DevicePeak(
        "V100 SXM2",
        r"\bV100-SXM2\b",
        {"fp32": 15.7, "fp16": 125.0},
        "NVIDIA Tesla V100 datasheet, V100 SXM2: single precision 15.7, tensor (fp16) 125 TFLOPS",
    ),
    DevicePeak(
        "V100 PCIe",
        r"\bV100-PCIE\b",  # not the V100S
        {"fp32": 14.0, "fp16": 112.0},
        "NVIDIA Tesla V100 datasheet, V100 PCIe: single precision 14, tensor (fp16) 112 TFLOPS",
    ),
    DevicePeak(
        "T4",
        r"\bT4\b",
        {"fp32": 8.1, "fp16": 65.0},
        "NVIDIA T4 datasheet: single precision 8.1, mixed precision (FP16/FP32) 65 TFLOPS",
    ),
)
"""The table, most specific pattern first (an H100 PCIe before the H100 SXM's catch-all)."""


@dataclass(frozen=True)
class Peak:
    """A device's dense peak for one dtype, or why there is none (``tflops`` None, ``reason`` says).

    >>> Peak(989.5, "bf16", "H100 SXM", "datasheet").flops
    989500000000000.0
    """

    tflops: float | None
    dtype: str
    device: str | None
    source: str
    reason: str = ""
    notes: tuple[str, ...] = field(default=())

    @property
    def flops(self) -> float | None:
        """The peak in FLOP/s."""
        return None if self.tflops is None else self.tflops * 1e12


def dtype_key(dtype: object) -> str | None:
    """The table's name for ``dtype`` (a ``torch.dtype`` or its name): ``fp32``, ``tf32``, ``bf16``,
    ``fp16``, ``fp8``; None for one the table has no peak for.

    >>> dtype_key("torch.bfloat16"), dtype_key("float8_e4m3fn"), dtype_key("int8")
    ('bf16', 'fp8', None)
    """
    name = str(dtype).lower().removeprefix("torch.")
    return _ALIASES.get(name)


def find_device(device_name: str, table: tuple[DevicePeak, ...] = PEAKS) -> DevicePeak | None:
    """The table's entry for a ``torch.cuda.get_device_name()`` string, or None.

    >>> find_device("NVIDIA A100-SXM4-80GB").device, find_device("NVIDIA A10G")
    ('A100', None)
    """
    for entry in table:
        if re.search(entry.pattern, device_name, flags=re.IGNORECASE):
            return entry
    return None


def check_peak_tflops(value: object) -> float | None:
    """``peak_tflops=`` as a positive finite float, or None; anything else is refused, naming it."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"peak_tflops must be a positive number of TFLOP/s or None, got {value!r}")
    return float(value)


def device_peak(
    device_name: str | None,
    dtype: object,
    *,
    peak_tflops: float | None = None,
    table: tuple[DevicePeak, ...] = PEAKS,
) -> Peak:
    """The dense peak of ``device_name`` (``torch.cuda.get_device_name()``; None: no CUDA device)
    for ``dtype``: ``peak_tflops`` when the user states it, else the table's, else an abstention
    whose ``reason`` says what is missing. A float32 matmul on a device without TF32 (V100, T4)
    runs at its fp32 peak, and says so in ``notes``.

    >>> device_peak("Tesla V100-SXM2-16GB", "tf32").tflops, device_peak("Tesla T4", "bf16").reason
    (15.7, "T4's datasheet gives no dense bf16 figure: pass peak_tflops=")
    """
    stated = check_peak_tflops(peak_tflops)
    key = dtype_key(dtype)
    label = key or str(dtype).removeprefix("torch.")
    if stated is not None:
        return Peak(stated, label, device_name, "stated by the user (peak_tflops=)")
    if device_name is None:
        return Peak(None, label, None, "", "no CUDA device to look up: state the peak with peak_tflops=")
    if key is None:
        why = f"no dense {label} peak in perfkit's table (it holds {', '.join(DTYPES)}): pass peak_tflops="
        return Peak(None, label, device_name, "", why)
    entry = find_device(device_name, table)
    if entry is None:
        why = f"{device_name!r} is not in perfkit's peak table: "
        why += "pass peak_tflops= (its datasheet's dense figure)"
        return Peak(None, key, device_name, "", why)
    notes: tuple[str, ...] = ()
    if key == "tf32" and "tf32" not in entry.tflops and "fp32" in entry.tflops:
        key, notes = "fp32", (f"{entry.device} has no TF32: its float32 matmuls run at the fp32 peak",)
    if key not in entry.tflops:
        why = f"{entry.device}'s datasheet gives no dense {key} figure: pass peak_tflops="
        return Peak(None, key, entry.device, entry.source, why)
    return Peak(entry.tflops[key], key, entry.device, entry.source, notes=notes)
