"""System info parsing and the ``analyze`` command's JSON/human output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from sparsify_tui.analysis.system import parse_cpuinfo
from sparsify_tui.engine import system_info

ROOT = Path(__file__).resolve().parents[1]

CPUINFO = """processor\t: 0
physical id\t: 0
core id\t\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse4_2 avx avx2 fma avx512f avx512bw avx512_vnni avx_vnni amx_tile amx_int8 amx_bf16

processor\t: 1
physical id\t: 0
core id\t\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse4_2 avx avx2 fma avx512f avx512bw avx512_vnni avx_vnni amx_tile amx_int8 amx_bf16

processor\t: 2
physical id\t: 1
core id\t\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse4_2 avx avx2 fma avx512f avx512bw avx512_vnni avx_vnni amx_tile amx_int8 amx_bf16
"""


def test_parse_cpuinfo_topology_and_instruction_sets():
    model, sets, physical, sockets = parse_cpuinfo(CPUINFO)
    assert model.startswith("Intel(R) Xeon")
    assert {"AVX2", "AVX512F", "AVX512_VNNI", "AVX_VNNI", "AMX_TILE", "AMX_INT8", "AMX_BF16"} <= set(sets)
    assert physical == 2 and sockets == 2  # two hyperthreads share core 0 of socket 0


def test_system_info_of_this_machine():
    info = system_info()
    assert 1 <= info.available_cores <= (os.cpu_count() or 1)
    assert "CPUExecutionProvider" in info.ort_providers and info.ort_version
    d = info.to_dict()
    assert {"available_cores", "physical_cores", "sockets", "cpu_model", "instruction_sets", "ort_version",
            "ort_providers", "python_version"} <= set(d)


def run(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "sparsify_tui", "analyze", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_analyze_json_on_the_demo_model(demo_model):
    proc = run(str(demo_model), "--batch-size", "2", "--dim", "x:2=48", "--dim", "x:3=192", "--json")
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert set(d) == {"model", "nodes", "totals", "system"}
    assert d["model"]["batch_size"] == 2 and d["model"]["inputs"][0]["resolved_shape"] == [2, 3, 48, 192]
    convs = [n for n in d["nodes"] if n["op_type"] == "Conv"]
    assert convs and all(n["prunable"] and n["weight_name"] and n["macs"] > 0 for n in convs)
    assert d["totals"]["macs"] == sum(n["macs"] for n in d["nodes"] if n["counted"])
    assert d["totals"]["flops"] > 2 * d["totals"]["macs"] > 0
    assert d["system"]["available_cores"] >= 1


def test_analyze_human_summary(demo_model):
    proc = run(str(demo_model), "--dim", "x:2=48", "--dim", "x:3=192", "--top", "3")
    assert proc.returncode == 0, proc.stderr
    assert "MACs" in proc.stdout and "FLOPs" in proc.stdout and "prunable layers 54" in proc.stdout
