#!/usr/bin/env python3
"""Thin one model headlessly with the core call apply will use (``engine.thinning.thin_model``).

Until ``optimize --structure channel`` / ``apply`` call it, this is the end-to-end entry:

    python benchmarks/thin_model.py MODEL.onnx OUT.onnx --ratio 0.3 [--override GROUP=R ...] [--round-to 8]
        [--importance l2|bn_scale] [--batch-size N] [--dim NAME=VALUE ...] [--no-check] [--json]

``--override GROUP=R`` sets one group's ratio (0 keeps it whole; ids from ``sparsify-tui analyze MODEL
--channel-groups``). Prints the result (``--json``: the ``ThinResult`` fields: ``structure``, per group
``{id, channels, kept, kept_indices}``, ``macs_before``/``macs_after``, ``exactness_max_rel_diff``, the output
difference against the original, file sizes, seconds, peak memory). Bad input (an unknown or non-prunable group,
a ratio out of range, a missing dim) is one line on stderr and exit code 2, as in the CLI.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sparsify_tui.errors import SparsifyError  # noqa: E402


def parse_overrides(items) -> dict:
    out = {}
    for item in items or []:
        gid, sep, value = item.rpartition("=")
        try:
            ratio = float(value)
        except ValueError:
            ratio = None
        if not sep or not gid or ratio is None:
            raise SparsifyError(f"bad --override {item!r}: write GROUP=RATIO, e.g. --override conv1.weight=0")
        out[gid] = ratio
    return out


def main(argv=None) -> int:
    from sparsify_tui.analysis.shapes import parse_dim_args
    from sparsify_tui.cli import print_json
    from sparsify_tui.engine.thinning import thin_model

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--ratio", type=float, default=None, help="fraction of channels removed from every prunable group")
    ap.add_argument("--override", action="append", default=[], metavar="GROUP=R")
    ap.add_argument("--round-to", type=int, default=None, help="default: 16 on AVX-512, else 8")
    ap.add_argument("--importance", default="l2", choices=["l2", "bn_scale"])
    ap.add_argument("--batch-size", type=int, default=1)
    ap.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--no-check", action="store_true", help="skip the exactness check and the output difference")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    try:
        res = thin_model(args.model, args.out, ratio=args.ratio, ratios=parse_overrides(args.override),
                         round_to=args.round_to, importance=args.importance, batch_size=args.batch_size,
                         dims=parse_dim_args(args.dim), check=not args.no_check)
    except SparsifyError as err:
        print(f"thin_model: error: {err}", file=sys.stderr)
        return err.exit_code
    if args.json:
        print_json(res.to_dict())
        return 0
    kept = sum(g.kept for g in res.groups)
    chans = sum(g.channels for g in res.groups)
    exact = "not checked" if res.exactness_max_rel_diff is None else f"{res.exactness_max_rel_diff:.1e}"
    nmse = "" if res.output_diff is None else f", output NMSE vs original {res.output_diff['nmse']:.3g}"
    print(f"{res.out_path}: {len(res.groups)} groups thinned ({kept} of {chans} channels kept, {len(res.skipped)} groups "
          f"not prunable), MACs {res.macs_before:,} -> {res.macs_after:,} ({res.macs_reduction:.2f}x fewer), "
          f"{res.file_size_bytes_before:,} -> {res.file_size_bytes_after:,} bytes, exactness {exact}{nmse}, "
          f"thinning {res.thinning_seconds:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
