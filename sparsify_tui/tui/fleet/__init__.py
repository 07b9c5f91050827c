"""The Fleet dialog (a perf profile or benchmark on the servers of a Ray cluster) and the grouping of the
Performance Profiles and Benchmarks lists by target machine."""

from sparsify_tui.tui.fleet.dialog import FleetDialog

__all__ = ["FleetDialog"]
