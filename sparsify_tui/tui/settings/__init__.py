"""Settings section: name, description, training settings, setup, size on disk, delete."""

from sparsify_tui.tui.settings.section import SettingsSection

__all__ = ["SettingsSection"]
