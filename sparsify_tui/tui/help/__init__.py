"""Help screen: every key binding, with the binding id used to remap it."""

from sparsify_tui.tui.help.screen import HelpScreen

__all__ = ["HelpScreen"]
