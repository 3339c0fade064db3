"""The ARM instruction set features this process's CPU offers, as the runtimes see them.

ONNX Runtime's MLAS (through pytorch/cpuinfo) and XNNPACK pick their aarch64 kernels
from the kernel's HWCAP words (`getauxval(AT_HWCAP)`, `AT_HWCAP2`): NEON only, dot
product (`asimddp`), int8 matrix multiply (`i8mm`), SVE. Under qemu-user those words are
the emulated CPU's (`-cpu`), so they say which kernels an emulated board's figures come
from. Names as Linux prints them in /proc/cpuinfo (arch/arm64/kernel/cpuinfo.c).
"""

from __future__ import annotations

import ctypes
import platform

AT_HWCAP, AT_HWCAP2 = 16, 26
_HWCAP = ("fp", "asimd", "evtstrm", "aes", "pmull", "sha1", "sha2", "crc32", "atomics",
          "fphp", "asimdhp", "cpuid", "asimdrdm", "jscvt", "fcma", "lrcpc", "dcpop",
          "sha3", "sm3", "sm4", "asimddp", "sha512", "sve", "asimdfhm", "dit", "uscat",
          "ilrcpc", "flagm", "ssbs", "sb", "paca", "pacg")
_HWCAP2 = ("dcpodp", "sve2", "sveaes", "svepmull", "svebitperm", "svesha3", "svesm4",
           "flagm2", "frint", "svei8mm", "svef32mm", "svef64mm", "svebf16", "i8mm", "bf16",
           "dgh", "rng", "bti", "mte")
# The ones that change which int8/float kernels run (the rest: crypto, memory model).
KERNEL_FEATURES = ("asimd", "asimdhp", "asimddp", "i8mm", "bf16", "sve", "sve2", "svei8mm")


def hwcap_features() -> list[str]:
    """The features named by HWCAP and HWCAP2 on aarch64 Linux; [] elsewhere."""
    if platform.machine() != "aarch64" or platform.system() != "Linux":
        return []
    try:
        getauxval = ctypes.CDLL(None).getauxval
    except (OSError, AttributeError):
        return []
    getauxval.restype = ctypes.c_ulong
    getauxval.argtypes = [ctypes.c_ulong]
    words = (int(getauxval(AT_HWCAP)), int(getauxval(AT_HWCAP2)))
    return [name for word, names in zip(words, (_HWCAP, _HWCAP2), strict=True)
            for bit, name in enumerate(names) if word >> bit & 1]


def kernel_features() -> str:
    """The kernel-picking features offered and those not: 'asimd; not asimddp i8mm …'."""
    features = set(hwcap_features())
    if not features:
        return "no HWCAP (not aarch64 Linux)"
    offered = [f for f in KERNEL_FEATURES if f in features]
    missing = [f for f in KERNEL_FEATURES if f not in features]
    return " ".join(offered) + (f"; not {' '.join(missing)}" if missing else "")
