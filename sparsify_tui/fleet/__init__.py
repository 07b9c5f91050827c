"""Fleet: the same core calls (a perf profile, a benchmark) dispatched to target servers through a Ray cluster.

An optional extra: ``pip install "sparsify-tui[fleet]"`` adds Ray. Importing this package never imports Ray;
every function that needs it calls :func:`require_ray`, which raises :class:`FleetError` with the install line.

Modules:

* :mod:`~sparsify_tui.fleet.cluster`: connect to a cluster as its driver (:func:`~sparsify_tui.fleet.cluster.connect`),
  list its alive nodes with what each node says about itself (:func:`~sparsify_tui.fleet.cluster.list_nodes`:
  hostname, CPU, cores, instruction sets, onnxruntime version, labels, custom resources) and choose targets
  (:func:`~sparsify_tui.fleet.cluster.select_targets`: ``all``, node ids, or ``KEY=VALUE`` labels);
* :mod:`~sparsify_tui.fleet.probe`: the same listing in a child process
  (:func:`~sparsify_tui.fleet.probe.describe_cluster`), so a CLI command's stdout or the TUI's screen never
  meets Ray's own output, and a failure is one line;
* :mod:`~sparsify_tui.fleet.dispatch`: run one core function on every target
  (:func:`~sparsify_tui.fleet.dispatch.run_on_targets`): one Ray task per target, pinned to its node and holding
  all of that node's CPUs, model files shipped through Ray's object store, no retries, progress per target,
  cancel, and a typed outcome per target with the node's machine info.

The driver (the process that calls these, a fleet job) is the only writer of the workspace: nodes only
measure and return results. This package sits beside ``optimization`` and ``benchmark`` in the layers: it may
use ``profiling``, ``engine`` and ``analysis``, and never the store, the jobs, the services or the UI, which
is why the core function a task runs is passed in (:class:`~sparsify_tui.fleet.dispatch.TargetCall`).
"""

from __future__ import annotations

from sparsify_tui.errors import SparsifyError

INSTALL_HINT = 'pip install "sparsify-tui[fleet]"'
"""How to add Ray to an installation of sparsify-tui."""


class FleetError(SparsifyError):
    """A Ray cluster cannot be used: Ray missing, an address that does not answer, no node matching the targets."""


def require_ray(*, load: bool = True):
    """The ``ray`` module (with ``load=False``: only check that it is installed, without the second it takes to
    import, and return None); :class:`FleetError` with the install line when Ray is not installed."""
    if not load:
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            raise FleetError(f"the fleet commands need Ray, which is not installed: {INSTALL_HINT}")
        return None
    try:
        import ray
    except ImportError:
        raise FleetError(f"the fleet commands need Ray, which is not installed: {INSTALL_HINT}") from None
    return ray
