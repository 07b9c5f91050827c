"""Projects section: every project in the workspace (`n` new, `enter` open, `d` delete)."""

from sparsify_tui.tui.projects.section import ProjectsSection

__all__ = ["ProjectsSection"]
