"""The baseline profiles of a new project: one rule for the New Project dialog (submitted as background jobs)
and ``sparsify-tui demo`` (run in the foreground)."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

#: (setup key, job type, label) of each baseline profile, in the order they run.
BASELINE = (("perf", "perf_profile", "Performance profile"), ("loss", "loss_profile", "Loss profile"))

TABLES = {"perf": "perf_profiles", "loss": "loss_profiles"}


def baseline_jobs(ws, project: Dict[str, Any], *, missing_only: bool = False) -> List[Tuple[str, Dict[str, Any], str]]:
    """``[(job type, args, label)]`` of the baseline profiles the project's setup turns on (``perf_enabled``,
    ``loss_enabled``; names ``perf_name``/``loss_name``, default "baseline"; the setup's batch size and
    cores). The loss profile is the weight-magnitude one (no data needed). ``missing_only``: skip a kind the
    project already has a profile of."""
    setup = project.get("setup") or {}
    out = []
    for key, job_type, label in BASELINE:
        if not setup.get(f"{key}_enabled", True):
            continue
        if missing_only and ws.list_records(project["id"], TABLES[key]):
            continue
        args: Dict[str, Any] = {"name": setup.get(f"{key}_name") or "baseline",
                                "batch_size": setup.get("batch_size", 1), "core_count": setup.get("core_count")}
        if key == "loss":
            args["method"] = "magnitude"
        out.append((job_type, args, label))
    return out
