"""Persistent state: the :class:`Workspace` (projects, records, blobs, jobs) on TinyDB files.

See :mod:`sparsify_tui.store.workspace` for the layout and :mod:`sparsify_tui.store.db` for the
atomic-write and locking rules. Never imports Textual.
"""

from sparsify_tui.store.workspace import DEFAULT_TRAINING, RECORD_TABLES, Workspace, default_root, now_iso

__all__ = ["Workspace", "RECORD_TABLES", "DEFAULT_TRAINING", "default_root", "now_iso"]
