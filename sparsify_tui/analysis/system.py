"""System info: the cores this process may use, the CPU and its instruction sets.

This module describes the machine only; it never imports a runtime. The runtime fields of
:class:`SystemInfo` (``ort_version``, ``ort_providers``; named for onnxruntime, the default engine, and
kept for the JSON documents) are filled by :func:`sparsify_tui.engine.system_info`, the one entry point
the profiles and benchmarks use.

Instruction sets come from the ``flags`` line of ``/proc/cpuinfo`` (Linux). Physical cores are the
distinct ``(physical id, core id)`` pairs of ``/proc/cpuinfo`` (falling back to
``/sys/devices/system/cpu/cpu*/topology``); sockets are the distinct ``physical id`` values.
"""

from __future__ import annotations

import os
import platform
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

from sparsify_tui import settings

#: /proc/cpuinfo flag -> name shown to users, in display order.
INSTRUCTION_FLAGS = {
    "sse4_2": "SSE4.2",
    "avx": "AVX",
    "avx2": "AVX2",
    "fma": "FMA",
    "f16c": "F16C",
    "avx512f": "AVX512F",
    "avx512bw": "AVX512BW",
    "avx512vl": "AVX512VL",
    "avx512_vnni": "AVX512_VNNI",
    "avx512_bf16": "AVX512_BF16",
    "avx512_fp16": "AVX512_FP16",
    "avx_vnni": "AVX_VNNI",
    "amx_tile": "AMX_TILE",
    "amx_int8": "AMX_INT8",
    "amx_bf16": "AMX_BF16",
    "asimd": "NEON",
    "asimddp": "ARM_DOTPROD",
    "sve": "SVE",
    "i8mm": "I8MM",
}


@dataclass
class SystemInfo:
    """The machine as this process sees it.

    ``available_cores``: CPUs in this process's affinity mask (what a session may use, see
    :func:`sparsify_tui.settings.available_cores`); ``physical_cores``/``sockets``: hardware topology (None when unknown);
    ``instruction_sets``: SIMD extensions relevant to inference speed (VNNI/AMX speed up INT8); ``hostname``: the
    network name of this machine (``platform.node()``), which tells two targets apart;
    ``ort_version``/``ort_providers``: the engine's version and execution providers ("" and [] when
    described without an engine, see :func:`machine_info`).
    """

    available_cores: int
    physical_cores: Optional[int]
    sockets: Optional[int]
    cpu_model: str
    instruction_sets: list = field(default_factory=list)
    ort_version: str = ""
    ort_providers: list = field(default_factory=list)
    python_version: str = ""
    logical_cores: Optional[int] = None
    machine: str = ""
    hostname: str = ""

    def to_dict(self) -> dict:
        """JSON-able dict (the ``system`` key of ``analyze --json``)."""
        return asdict(self)

    @property
    def vnni(self) -> bool:
        """True when the CPU has an INT8 dot-product extension (AVX512_VNNI, AVX_VNNI or AMX_INT8)."""
        return any(x in self.instruction_sets for x in ("AVX512_VNNI", "AVX_VNNI", "AMX_INT8"))


def _read(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


def parse_cpuinfo(text: str) -> tuple[str, list[str], Optional[int], Optional[int]]:
    """Parse ``/proc/cpuinfo`` text into ``(cpu_model, instruction_sets, physical_cores, sockets)``."""
    model = ""
    flags: set[str] = set()
    cores: set[tuple[str, str]] = set()
    sockets: set[str] = set()
    phys = core = None
    for line in text.splitlines() + [""]:
        if not line.strip():
            if phys is not None and core is not None:
                cores.add((phys, core))
            phys = core = None
            continue
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key in ("model name", "Model Name", "cpu model") and not model:
            model = value
        elif key in ("flags", "Features"):
            flags.update(value.split())
        elif key == "physical id":
            phys = value
            sockets.add(value)
        elif key == "core id":
            core = value
    sets = [name for flag, name in INSTRUCTION_FLAGS.items() if flag in flags]
    return model, sets, (len(cores) or None), (len(sockets) or None)


def _sys_topology() -> tuple[Optional[int], Optional[int]]:
    cores, sockets = set(), set()
    for d in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/topology"):
        pkg = _read(str(d / "physical_package_id")).strip()
        core = _read(str(d / "core_id")).strip()
        if pkg and core:
            cores.add((pkg, core))
            sockets.add(pkg)
    return (len(cores) or None), (len(sockets) or None)


def machine_info(runtime_version: str = "", runtime_providers: Optional[list] = None) -> SystemInfo:
    """Describe this machine: cores (available/physical/sockets), CPU model and instruction sets, with the
    given runtime version and providers (empty by default: use :func:`sparsify_tui.engine.system_info`
    for the engine's). Costs about 1 ms (one read of ``/proc/cpuinfo``)."""
    model, sets, physical, sockets = parse_cpuinfo(_read("/proc/cpuinfo"))
    if physical is None or sockets is None:
        p2, s2 = _sys_topology()
        physical = physical or p2
        sockets = sockets or s2
    return SystemInfo(
        available_cores=settings.available_cores(),
        physical_cores=physical,
        sockets=sockets,
        cpu_model=model or platform.processor() or platform.machine(),
        instruction_sets=sets,
        ort_version=runtime_version,
        ort_providers=list(runtime_providers or []),
        python_version=platform.python_version() or sys.version.split()[0],
        logical_cores=os.cpu_count(),
        machine=platform.machine(),
        hostname=platform.node(),
    )


def _int_file(path: str) -> Optional[int]:
    text = _read(path).strip()
    try:
        return int(text)
    except ValueError:
        return None  # "max" (no cgroup limit), missing file


def job_memory_limit() -> tuple[Optional[int], str]:
    """``(bytes, what set it)``: the memory a job may allocate, beyond what its process holds when it starts.
    ``$SPARSIFY_TUI_MAX_MEMORY`` (``--max-memory SIZE`` sets it; ``none``: no limit), else the memory available
    now (:func:`available_memory_bytes`), so a model that allocates more (a ConstantOfShape of 160 GB) fails in one
    line instead of swapping the machine or meeting the kernel's OOM killer. The job runner enforces it
    (:func:`sparsify_tui.engine.memory.memory_limit`)."""
    limit, given = settings.max_memory_setting()
    if given:
        return limit, f"--max-memory / {settings.MAX_MEMORY_ENV}"
    return available_memory_bytes(), "the memory available when it started"


def available_memory_bytes() -> Optional[int]:
    """Bytes this process can still allocate, or None when unknown (non-Linux).

    The smallest of: ``MemAvailable`` of ``/proc/meminfo``; the cgroup limit minus its usage (v2
    ``memory.max``/``memory.current``, v1 ``memory.limit_in_bytes``/``memory.usage_in_bytes``), which is what
    a container may use; the address-space limit (``RLIMIT_AS``) minus this process's ``VmSize``.
    """
    candidates = []
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemAvailable:"):
            try:
                candidates.append(int(line.split()[1]) * 1024)
            except (IndexError, ValueError):
                pass
    for limit, usage in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                         ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        lim, used = _int_file(limit), _int_file(usage)
        if lim is not None and used is not None and lim < 1 << 60:
            candidates.append(max(0, lim - used))
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
        if soft not in (resource.RLIM_INFINITY, -1):
            vm = 0
            for line in _read("/proc/self/status").splitlines():
                if line.startswith("VmSize:"):
                    vm = int(line.split()[1]) * 1024
            candidates.append(max(0, soft - vm))
    except (ImportError, ValueError, OSError):  # pragma: no cover - non-Unix
        pass
    return min(candidates) if candidates else None
