"""New project dialog: model path (completion, file browser), name, profiles, batch size, cores, dims."""

from sparsify_tui.tui.new_project.dialog import NewProjectDialog

__all__ = ["NewProjectDialog"]
