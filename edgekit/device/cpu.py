"""What this CPU's int8 kernels can be trusted with (stdlib only; read once per process).

onnxruntime's x86 U8S8 kernels multiply uint8 activations by int8 weights with VPMADDUBSW,
which adds two products into an int16 and saturates (255 * 127 * 2 > 32767). CPUs with VNNI
(VPDPBUSD, 32-bit accumulation) and Arm CPUs do not saturate. onnxruntime's quantization docs
name the remedy: 7-bit weights (``reduce_range``). Without VNNI the fused model lands steps
off where LiteRT and the unfused QDQ graph agree exactly (docs/measurements/exact_int8.md).
"""

from __future__ import annotations

import functools
import platform

X86 = {"x86_64", "amd64", "i386", "i686"}
VNNI_FLAGS = {"avx512_vnni", "avx_vnni", "amx_int8"}


CPUINFO_BYTES = 4 << 20  # ~1.5 kB per core on x86; a bounded read like every system file


@functools.cache
def cpuinfo_lines() -> tuple[str, ...]:
    """/proc/cpuinfo's lines, read bounded (``edgekit.device.sysfs``); empty where unreadable."""
    from edgekit.device.sysfs import read_text_within

    return tuple((read_text_within("/proc/cpuinfo", CPUINFO_BYTES) or "").splitlines())


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The ``flags`` of /proc/cpuinfo (empty where there is none)."""
    for line in cpuinfo_lines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


@functools.cache
def cpu_part() -> str:
    """The Arm ``CPU part`` of /proc/cpuinfo (``0xd08``: Cortex-A72); "" elsewhere. A test
    vector set computed under an emulated CPU (``--golden-on``) is exact on this part."""
    for line in cpuinfo_lines():
        if line.startswith("CPU part"):
            return line.partition(":")[2].strip().lower()
    return ""


@functools.cache
def u8s8_saturates() -> bool:
    """True where onnxruntime's fused uint8 x int8 kernels can saturate (x86 without VNNI)."""
    if platform.machine().lower() not in X86:
        return False
    return not (cpu_flags() & VNNI_FLAGS)


def exact_int8_needs_unfused(reduce_range: bool) -> bool:
    """Whether a QDQ model must run unfused here to compute what its int8 math says.

    Unfused (optimization BASIC), onnxruntime evaluates DequantizeLinear -> float op ->
    QuantizeLinear as written: exact, slower. 7-bit weights cannot saturate, so they fuse.
    """
    return u8s8_saturates() and not reduce_range


# Said once, at the first predict of an int8 ONNX model that runs unfused here (logger
# "edgekit"). The figure: tools/benchmarks/bench_exact_int8.py (docs/measurements/exact_int8.md).
UNFUSED_NOTE = (
    "this int8 ONNX model runs unfused on this CPU: onnxruntime's fused int8 kernels saturate "
    "8-bit weights on x86 without VNNI, so edgekit runs the int8 math as written to get "
    "exactly what the target board computes, about 4-6x slower than the fused kernels and "
    "often slower than the float model. For speed over exactness (outputs a few steps off): "
    "edgekit.load(..., exact_int8=False), or `edgekit run/bench --fast-int8`. On the board "
    "(Arm) and on x86 CPUs with VNNI the fused kernels are exact and this does not apply.")

# onnxruntime session config that, in an unfused (BASIC) session, lets constant folding turn
# DequantizeLinear(int8 weight) into the float weight once at load, instead of on every run
# (ORT skips folding DQ nodes to keep QDQ groups for fusions that an unfused session never
# does). The same float values, so the same results bit for bit; re-dequantizing weights was
# a small model's largest cost (docs/measurements/exact_int8.md).
UNFUSED_FOLD_WEIGHTS = ("session.disable_quant_qdq", "1")

# onnxruntime graph transformers every edgekit session leaves out. WeightBiasQuantization
# (BASIC level, on unless disable_quant_qdq) re-quantizes a float weight between QDQ'd
# activations to int8: it undoes the accuracy guard's "kept float" layers on the device,
# while validation and test vectors ran them float. Measured on the zoo's squeezenet (16 convs
# kept float): 44.5 -> 37.5 dB vs float and FAIL on the emulated A72 (tools/studies/diagnose_cross_isa.py).
ORT_DISABLED_OPTIMIZERS = ["WeightBiasQuantization"]
