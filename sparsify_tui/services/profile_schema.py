"""The schema of an exported perf profile (``profile export`` / ``profile import``,
:mod:`sparsify_tui.services.exchange`), checked before anything of an imported file is stored.

An imported file comes from another machine, or from anyone: every field a screen, an estimate or a report reads
has a type and a range here (JSON Schema, checked with the ``jsonschema`` library), numbers are finite (``NaN`` and
``Infinity`` are refused while parsing, every other number is within ``±1e15``), names hold no control characters,
and sizes are bounded: the file (:data:`MAX_IMPORT_BYTES`), the rows (:data:`MAX_ROWS`), each string and list. A
file that breaks a rule is refused in one line naming the field, its value and the rule; nothing is stored.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Dict, Union

from sparsify_tui.errors import SparsifyError
from sparsify_tui.settings import MAX_BATCH_SIZE

FORMAT = "sparsify-tui/perf-profile"
"""The ``format`` of an exported perf profile document."""
FORMAT_VERSION = 1
MAX_IMPORT_BYTES = 64 << 20
"""Largest profile file ``profile import`` reads (64 MiB; about 90,000 rows as ``profile export`` writes them)."""
MAX_ROWS = 100_000
"""Most rows (nodes and special rows) an imported perf profile may have."""
MAX_MS = 1e7
"""Largest time in ms a row or a latency may state (2.8 hours per batch)."""
MAX_NUMBER = 1e15
"""Any other number of the file lies within ±this."""
MAX_DEPTH = 16
"""Deepest nesting of objects and lists in the file."""

_NAME = {"type": "string", "minLength": 1, "maxLength": 200, "pattern": r"^[^\x00-\x1f\x7f-\x9f]*$"}
_TEXT = {"type": ["string", "null"], "maxLength": 4096}
_MS = {"type": "number", "minimum": 0, "maximum": MAX_MS}
_MS_OR_NULL = {"type": ["number", "null"], "minimum": 0, "maximum": MAX_MS}
_COUNT = {"type": ["integer", "null"], "minimum": 0, "maximum": MAX_NUMBER}
_CORES = {"type": ["integer", "null"], "minimum": 1, "maximum": 65536}
_STRINGS = {"type": "array", "maxItems": 256, "items": {"type": "string", "maxLength": 256}}
_LATENCY = {"type": "object", "required": ["median"],
            "properties": {k: _MS_OR_NULL for k in ("median", "p90", "mean", "min", "max", "std")}}
_RATIO = {"type": ["number", "null"], "minimum": 0, "maximum": 1e6}

SCHEMA: Dict[str, Any] = {
    "type": "object",
    "required": ["format", "format_version", "model", "profile", "nodes"],
    "properties": {
        "format": {"type": "string"},
        "format_version": {"type": "integer", "minimum": 1},
        "exported": _TEXT,
        "sparsify_tui": _TEXT,
        "project": _TEXT,
        "model": {"type": "object", "required": ["sha256"], "properties": {
            "file": _TEXT, "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"}, "size_bytes": _COUNT,
            "opset": _COUNT, "params": _COUNT, "macs": _COUNT, "flops": _COUNT, "nodes": _COUNT}},
        "machine": {"type": "object", "properties": {
            "hostname": _TEXT, "cpu_model": _TEXT, "instruction_sets": _STRINGS, "available_cores": _CORES,
            "physical_cores": _CORES, "sockets": _CORES, "ort_version": _TEXT, "machine": _TEXT}},
        "settings": {"type": "object"},
        "profile": {"type": "object", "required": ["name", "batch_size", "core_count", "latency_ms",
                                                   "items_per_second"],
                    "properties": {
                        "name": _NAME,
                        "batch_size": {"type": "integer", "minimum": 1, "maximum": MAX_BATCH_SIZE},
                        "core_count": {"type": "integer", "minimum": 1, "maximum": 65536},
                        "instruction_sets": _STRINGS,
                        "latency_ms": _LATENCY,
                        "items_per_second": {"type": "number", "minimum": 0, "maximum": MAX_NUMBER},
                        "int8": {"type": "object", "properties": {
                            "enabled": {"type": "boolean"}, "error": _TEXT, "latency_ms": _LATENCY,
                            "items_per_second": {"type": ["number", "null"], "minimum": 0, "maximum": MAX_NUMBER},
                            "speedup": _RATIO, "speedup_interleaved": _RATIO,
                            "interleaved": {"type": "object", "properties": {
                                "fp32_ms": _MS_OR_NULL, "int8_ms": _MS_OR_NULL,
                                "round_ratios": {"type": "array", "maxItems": 1000, "items": _RATIO}}},
                            "warnings": _STRINGS}},
                        "model": _TEXT, "ort_version": _TEXT,
                        "settings": {"type": "object"}, "inputs": {"type": "object"},
                        "profiled": {"type": "object"}, "pruned_estimate": {"type": "object"},
                        "warmup": {"type": "integer", "minimum": 0, "maximum": 1_000_000},
                        "iterations": {"type": "integer", "minimum": 1, "maximum": 1_000_000},
                        "dims": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 1,
                                                                             "maximum": 2 ** 31 - 1}},
                        "created": _TEXT, "status": _TEXT,
                        "seconds": {"type": "number", "minimum": 0, "maximum": MAX_NUMBER},
                        "seconds_without_int8": {"type": "number", "minimum": 0, "maximum": MAX_NUMBER},
                        "warnings": _STRINGS,
                        "machine": {"type": "object"}}},
        "nodes": {"type": "array", "minItems": 1, "maxItems": MAX_ROWS, "items": {
            "type": "object", "required": ["index", "id", "op_type", "time_ms"], "properties": {
                "index": {"type": "integer", "minimum": 0, "maximum": MAX_ROWS * 100},
                "id": {"type": "string", "minLength": 1, "maxLength": 4096},
                "op_type": {"type": "string", "maxLength": 128},
                "weight_name": _TEXT,
                "time_ms": _MS, "scaled_ms": _MS_OR_NULL, "int8_time_ms": _MS_OR_NULL, "int8_scaled_ms": _MS_OR_NULL,
                "mean_ms": _MS_OR_NULL, "spread_ms": _MS_OR_NULL,
                "share": {"type": "number", "minimum": 0, "maximum": 1.000001},
                "flops": {"type": ["integer", "number"], "minimum": 0, "maximum": MAX_NUMBER},
                "gflops_per_s": {"type": ["number", "null"], "minimum": 0, "maximum": MAX_NUMBER},
                "est_pruned_ms": {"type": "object", "maxProperties": 64,
                                  "propertyNames": {"pattern": r"^(0|1)(\.[0-9]{1,6})?$"},
                                  "additionalProperties": _MS},
                "prunable": {"type": "boolean"}, "depthwise": {"type": "boolean"},
                "graph": {"type": "string", "maxLength": 4096},
                "fused_into": _TEXT,
                "kernels": _STRINGS, "int8_kernels": _STRINGS}}},
    },
}


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def _walk(doc: Any, where: str) -> None:
    """Every number finite and within ±:data:`MAX_NUMBER`, nesting at most :data:`MAX_DEPTH` deep."""
    stack = [(doc, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise SparsifyError(f"{where} nests deeper than {MAX_DEPTH} levels (at {path or 'the top'}): give the file "
                                "written by `sparsify-tui profile export`")
        if isinstance(value, bool) or value is None or isinstance(value, str):
            continue
        if isinstance(value, (int, float)):
            if not (math.isfinite(value) and abs(value) <= MAX_NUMBER):
                raise SparsifyError(f"{where}: {path} is {value!r}, outside ±{MAX_NUMBER:g}: export the profile "
                                    "again")
        elif isinstance(value, dict):
            stack.extend((v, f"{path}.{k}" if path else str(k), depth + 1) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value))


def load_profile_document(path: Union[str, Path]) -> Dict[str, Any]:
    """Read an exported perf profile and check it against :data:`SCHEMA` (module docstring). Returns the document.
    Raises ``SparsifyError`` (one line, naming the file and what is wrong) for a missing file, one over
    :data:`MAX_IMPORT_BYTES`, bad JSON (``NaN``/``Infinity`` included), another format or a newer version, too many
    rows, and any value of the wrong type or out of range."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise SparsifyError(f"{p} does not exist or is not a file: give the JSON written by `sparsify-tui profile export`")
    size = p.stat().st_size
    if size > MAX_IMPORT_BYTES:
        raise SparsifyError(f"{p.name} is {size / (1 << 20):.1f} MiB, over the import limit of "
                            f"{MAX_IMPORT_BYTES >> 20} MiB (profile_schema.MAX_IMPORT_BYTES; a real export holds "
                            f"at most {MAX_ROWS} rows): give the file written by `sparsify-tui profile export`")
    try:
        doc = json.loads(p.read_text(encoding="utf-8"), parse_constant=_reject_constant)
    except RecursionError:
        raise SparsifyError(f"{p.name} nests too deep to be a profile: give the file written by "
                            "`sparsify-tui profile export`") from None
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise SparsifyError(f"{p} is not valid JSON ({str(err).splitlines()[0][:80]}): give the file written by "
                            "`sparsify-tui profile export`") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise SparsifyError(f"{p} is not a sparsify-tui perf profile (no \"format\": \"{FORMAT}\"): give the file "
                            "written by `sparsify-tui profile export`")
    version = doc.get("format_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION:
        raise SparsifyError(f"{p} has format version {version}, newer than this sparsify-tui reads "
                            f"({FORMAT_VERSION}): upgrade sparsify-tui")
    nodes = doc.get("nodes")
    if isinstance(nodes, list) and len(nodes) > MAX_ROWS:
        raise SparsifyError(f"{p.name} has {len(nodes)} rows, over the import limit of {MAX_ROWS} "
                            "(profile_schema.MAX_ROWS): give the file written by `sparsify-tui profile export`")
    _walk(doc, p.name)
    _check_schema(doc, p.name)
    return doc


def _check_schema(doc: Dict[str, Any], where: str) -> None:
    import jsonschema

    validator = jsonschema.Draft202012Validator(SCHEMA)
    error = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    if error is None:
        return
    field = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path).lstrip(".") or "the top"
    value = json.dumps(error.instance)
    value = value if len(value) <= 40 else value[:37] + "..."
    rule = error.message if len(error.message) <= 100 else error.message[:97] + "..."
    if error.validator in ("minimum", "maximum", "type", "pattern", "maxLength", "minLength", "maxItems",
                           "enum", "const", "minItems"):
        rule = f"{error.validator} {json.dumps(error.validator_value)[:60]}"
    raise SparsifyError(f"{where}: {field} is {value}, which breaks the profile schema ({rule}): give the file "
                        "written by `sparsify-tui profile export`, unedited")
