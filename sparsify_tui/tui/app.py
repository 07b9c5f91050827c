"""The sparsify-tui Textual app: a projects list and five per-project sections.

Layout: Header (open project) / section bar (1-6, clickable) / a ContentSwitcher holding the sections /
Footer. The Projects section is always mounted; the five project sections are mounted the first time
they are shown for the open project (and removed when another project is opened). Each section is a
feature package next to this module (its widget, dialogs, messages and .tcss).

Every workspace, job and core call runs in a thread worker (:mod:`sparsify_tui.tui.workers`) that posts
its result as a typed message; a failure reaches :meth:`SparsifyApp.on_worker_state_changed`, the one
place that turns it into the error dialog.
"""

from __future__ import annotations

import asyncio
import os
from functools import partial
from typing import Any, Optional

from textual import events, on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import ContentSwitcher, Header, Static
from textual.worker import Worker, WorkerState

from sparsify_tui.tui import messages
from sparsify_tui.tui.projects import ProjectsSection
from sparsify_tui.tui.widgets.dialogs import ErrorDialog, error_message
from sparsify_tui.tui.widgets.footer import KeysFooter
from sparsify_tui.tui.workers import app_work, post_result

# (section id, label, short label for the section bar)
SECTIONS = [
    ("projects", "Projects", "Projects"),
    ("perf", "Performance Profiles", "Perf"),
    ("loss", "Loss Profiles", "Loss"),
    ("optimization", "Optimization", "Optimize"),
    ("benchmarks", "Benchmarks", "Bench"),
    ("settings", "Settings", "Settings"),
]
SECTION_LABELS = {sid: label for sid, label, _ in SECTIONS}
# what the section's digit key shows (its tooltip in the help and the command palette)
SECTION_TOOLTIPS = {
    "projects": "Show the projects list",
    "perf": "Performance profiles of the open project (FLOPS and measured)",
    "loss": "Loss profiles of the open project",
    "optimization": "Optimizations (recipes) of the open project",
    "benchmarks": "Benchmarks of the open project",
    "settings": "Settings of the open project",
}
# the Widget class of each per-project section, by module and name (mounted when first shown for the open
# project; imported then, so the Projects screen starts without them: cold start is a user's first wait)
SECTION_CLASSES = {
    "perf": ("sparsify_tui.tui.perf", "PerfSection"),
    "loss": ("sparsify_tui.tui.loss", "LossSection"),
    "optimization": ("sparsify_tui.tui.optimization", "OptimizationSection"),
    "benchmarks": ("sparsify_tui.tui.benchmarks", "BenchmarksSection"),
    "settings": ("sparsify_tui.tui.settings", "SettingsSection"),
}


# a notification's width (Textual's Toast: 60 cells, at most half the screen) and what its frame takes (padding 1
# on both sides, the left bar, the rack's edge)
TOAST_WIDTH, TOAST_FRAME = 60, 4

# what the sections' first workers import (numpy, onnx): opening a project loads its perf profile through these,
# which took most of the first open of a 1,500-node project when imported then
PRELOAD_CORE = ["sparsify_tui.services.profiles", "sparsify_tui.profiling.perf", "sparsify_tui.profiling.loss"]


def takes_keys(widget: Any, event: events.Key) -> bool:
    """True when ``widget`` handles keys itself before any binding: it says so (``takes_key(event)``: a text field
    takes printable keys and its own editing keys, a section's field only while it is edited,
    :mod:`sparsify_tui.tui.widgets.inputs`), it may consume this one (a printable key), or a class of its own (not
    Textual's Widget/Screen base) has a key handler (``_on_key``, ``on_key`` or ``key_*``: a select's
    type-to-search)."""
    from textual.screen import Screen

    own = getattr(widget, "takes_key", None)
    if callable(own):
        return bool(own(event))
    if widget.check_consume_key(event.key, event.character):
        return True
    for cls in type(widget).__mro__:
        if cls in (Widget, Screen) or cls.__module__.startswith(("textual.dom", "textual.message_pump")):
            continue
        if any(name in ("_on_key", "on_key") or name.startswith(("key_", "_key_")) for name in cls.__dict__):
            return True
    return False


def _unfuse_escape_digits() -> None:
    """Read escape followed at once by a digit, ``-`` or ``=`` as those two keys (issue 30 bug 4).

    Textual's key table maps ``ESC 5`` to "∞" (``ESC 1`` to "¡"...: macOS Option-digit glyphs), so escape then a
    digit typed within its escape delay (0.1 s; over SSH keys come that fast) reached the app as one glyph key and
    the digit was lost. Without these entries the parser reads ``ESC 5`` as alt+5, which is also what a terminal
    sends for alt+5, and :meth:`SparsifyApp.on_event` hands on alt+KEY as escape then KEY (the app binds no alt
    key). A glyph typed as itself (a UTF-8 "£") is unchanged. ``ESC f`` / ``ESC b`` (word moves) stay."""
    from textual._ansi_sequences import ANSI_SEQUENCES_KEYS

    for char in "1234567890-=§":
        value = ANSI_SEQUENCES_KEYS.get("\x1b" + char)
        if isinstance(value, str):
            del ANSI_SEQUENCES_KEYS["\x1b" + char]


def escape_then_key(event: events.Key) -> Optional[list[events.Key]]:
    """alt+KEY (the terminal's ``ESC KEY``: escape and a key typed within the parser's escape delay) as the two keys
    escape, KEY; None for any other key."""
    if not event.key.startswith("alt+") or not event.character or len(event.character) != 1:
        return None
    from textual._xterm_parser import XTermParser

    keys = [k for k in XTermParser().feed(event.character) if isinstance(k, events.Key)]
    return [events.Key("escape", "\x1b"), *keys] if len(keys) == 1 else None


def section_class(section: str) -> type[Widget]:
    """The Widget class of a per-project section (imported on first use)."""
    import importlib

    module, name = SECTION_CLASSES[section]
    return getattr(importlib.import_module(module), name)


class SectionBar(Static):
    """One line: `1 Projects  2 Perf ...`, the current section highlighted; click to switch."""

    DEFAULT_CSS = """
    SectionBar { height: 1; background: $panel; color: $text-muted; }
    """

    def show(self, current: str, has_project: bool) -> None:
        parts = []
        for n, (sid, label, short) in enumerate(SECTIONS, start=1):
            text = label if self.app.size.width >= 110 else short
            if sid == current:
                parts.append(f"[@click=app.show_section('{sid}')][reverse bold] {n} {text} [/][/]")
            elif sid != "projects" and not has_project:
                parts.append(f"[dim] {n} {text} [/]")
            else:
                parts.append(f"[@click=app.show_section('{sid}')] [b]{n}[/b] {text} [/]")
        self.update("".join(parts))


#: (palette label, section, the section's action, help): what the palette can do in the open project
PROJECT_ACTIONS = [
    ("New performance profile", "perf", "new", "measure per-layer times on a runtime here (n in Perf)"),
    ("Rerun the selected perf profile", "perf", "rerun", "measure it again with its settings (r in Perf)"),
    ("New loss profile", "loss", "new", "per-layer pruning and INT8 sensitivity (n in Loss)"),
    ("Optimize: new optimization", "optimization", "new", "per-layer sparsity and INT8 from the profiles "
                                                           "(n in Optimize)"),
    ("Export recipe and training code", "optimization", "export", "YAML recipe + PyTorch/Keras code (e in Optimize)"),
    ("INT8 search within an accuracy budget", "optimization", "int8_search",
     "the fastest INT8 config whose metric stays within the budget (I in Optimize)"),
    ("Budget search: fastest model within an accuracy budget", "optimization", "budget_search",
     "channels + reconstruction (INT8 optional), measured against FP32 (B in Optimize)"),
    ("Compare perf profiles", "perf", "compare", "the marked profiles per node, or FP32 vs INT8 (= in Perf)"),
    ("Calibrate channel pruning on this server", "perf", "calibrate",
     "thin the model at a few ratios and profile each: the channel time model (k in Perf)"),
    ("Compare optimizations", "optimization", "compare", "settings, layers, measured side by side (= in Optimize)"),
    ("Apply: write the optimized .onnx", "benchmarks", "apply", "prune (and quantize) exactly (a in Bench)"),
    ("New benchmark", "benchmarks", "new", "baseline vs optimized, measured (n in Bench)"),
]


class SparsifyCommands(Provider):
    """Command palette: sections, actions (new project, profiles, optimize, export, apply, benchmark, the Jobs
    view), open any project, help."""

    def _commands(self) -> list[tuple[str, Any, str]]:
        app: SparsifyApp = self.app  # type: ignore[assignment]
        cmds: list[tuple[str, Any, str]] = []
        for n, (sid, label, _short) in enumerate(SECTIONS, start=1):
            cmds.append((f"Go to {label}", partial(app.action_show_section, sid), f"key {n}"))
        cmds.append(("New project", app.action_new_project, "create a project from an .onnx model (n in Projects)"))
        cmds.append(("Jobs: every running, queued and finished job", app.action_jobs, "cancel, log (key j)"))
        if app.project_id is not None:
            for label, section, action, help_text in PROJECT_ACTIONS:
                cmds.append((label, partial(app.action_section_action, section, action), help_text))
        cmds.append(("Help: keys", app.action_help, "every key binding (?)"))
        if app.project_id is not None:
            cmds.append(("Write a report of this project", app.action_report, "Markdown, HTML or JSON (w)"))
        for project in self._projects:
            cmds.append((f"Open project {project['name']}",
                         partial(app.open_project, project["id"], name=project.get("name")),
                         project.get("model", {}).get("file", "")))
        return cmds

    async def startup(self) -> None:
        app: SparsifyApp = self.app  # type: ignore[assignment]
        # the palette awaits its commands: a thread, not the event loop (nor a worker: nothing to post)
        try:
            self._projects = await asyncio.to_thread(app.workspace.list_projects)
        except Exception:  # the palette must open even if the workspace is unreadable
            self._projects = []

    async def discover(self) -> Hits:
        for label, callback, help_text in self._commands():
            yield DiscoveryHit(label, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for label, callback, help_text in self._commands():
            score = matcher.match(label)
            if score > 0:
                yield Hit(score, matcher.highlight(label), callback, help=help_text)


class SparsifyApp(App[int]):
    """sparsify-tui. `workspace`: the :class:`sparsify_tui.store.Workspace` every section reads and writes."""

    # app-wide rules first, then each section's own (.tcss next to its widgets)
    CSS_PATH = ["app.tcss", "projects/projects.tcss", "settings/settings.tcss", "perf/perf.tcss",
                "new_project/new_project.tcss", "jobs/jobs.tcss"]
    TITLE = "sparsify-tui"
    COMMANDS = App.COMMANDS | {SparsifyCommands}

    BINDINGS = [
        *(Binding(str(n), f"show_section('{sid}')", short, show=False, id=f"section.{sid}",
                  tooltip=SECTION_TOOLTIPS[sid]) for n, (sid, _label, short) in enumerate(SECTIONS, start=1)),
        # tab moves the focus when the app reads the key, before it hands the next key on: a burst such as
        # "tab tab backspace 1" (a fast typist, a paste, a slow link) edits the field it lands on. As an ordinary
        # binding, the keys behind tab went to the field tab was leaving (Textual forwards each key to the widget
        # focused when it is read, and a forwarded tab moves the focus only once that widget has handled it)
        Binding("tab", "focus_next", "Next field", show=False, priority=True, id="app.focus_next",
                tooltip="Move the focus to the next widget"),
        Binding("shift+tab", "focus_previous", "Previous field", show=False, priority=True,
                id="app.focus_previous", tooltip="Move the focus to the previous widget"),
        Binding("j", "jobs", "Jobs", id="app.jobs",
                tooltip="Every job of every project: status, progress, ETA, errors; cancel and log"),
        Binding("question_mark", "help", "Help", id="app.help", tooltip="List every key"),
        Binding("w", "report", "Report", show=False, id="app.report",
                tooltip="Write a report of the open project (Markdown, HTML or JSON)"),
        Binding("z", "toggle_list", "List pane", show=False, id="app.toggle_list",
                tooltip="Hide the list pane of the sections (its width goes to the view: at 80 columns the "
                        "tables show more columns); again: show it"),
        Binding("escape", "leave_field", "Leave field", id="app.leave_field",
                tooltip="Leave a text field (then 1-6 and the section keys work again)"),
        Binding("q", "quit", "Quit", id="app.quit", tooltip="Quit sparsify-tui (jobs keep running)"),
        Binding("ctrl+p", "command_palette", "Palette", id="app.palette",
                tooltip="Command palette: sections, actions (new profile, optimize, export, apply, benchmark, jobs), "
                        "projects"),
    ]

    section: reactive[str] = reactive("projects", init=False)
    project_id: reactive[Optional[str]] = reactive(None, init=False)
    #: how often the open project's change stamp is read (:meth:`_watch_project`: one ``stat`` in a thread)
    WATCH_SECONDS: float = 1.0
    #: the longest a key waits for a tab being built (:meth:`keys_wait_for`)
    KEY_WAIT_SECONDS: float = 2.0

    def __init__(self, *, model: Optional[str] = None, project: Optional[str] = None,
                 workspace: Any = None, **kwargs) -> None:
        from sparsify_tui.tui.safe_text import install as show_control_characters

        _unfuse_escape_digits()
        show_control_characters()  # names from models and files never reach the terminal as escape sequences
        super().__init__(**kwargs)
        if "TEXTUAL_ANIMATIONS" not in os.environ:
            # no sliding tab underlines or smooth scrolls: every animation frame is bytes on a slow SSH link
            self.animation_level = "none"
        if os.environ.get("NO_COLOR"):
            self.add_class("-no-color")  # app.tcss: cursors and active tabs also change their text style
        if workspace is None:
            from sparsify_tui.store import Workspace

            workspace = Workspace()
        self.workspace = workspace
        self._project_name: Optional[str] = None
        self._key_buffer: Any = None  # the KeyBuffer of the dialog coming (hold_keys / show_dialog)
        self._start_model = model
        self._start_project = project
        self._stamp: Any = None  # the open project's change stamp, last read (Workspace.project_stamp)
        self._stamp_reading = False
        self._key_waits: set = set()  # tasks the next keys wait for (keys_wait_for)
        self._apply_user_keymap()

    # -- keys, in the order they are typed ------------------------------------------------------
    async def on_event(self, event: events.Event) -> None:
        """A key read from the terminal runs its binding now, when the focused widget does not take keys itself.

        Textual hands every key to the focused widget and runs a binding only once the key has bubbled back up to
        the app, while it has already handed on the keys typed after it: typed at once (a fast typist over SSH, a
        paste, ``tmux send-keys``), "n" then a name sent the name to the list under the coming dialog, and "enter
        l" opened a profile after "l" had acted on the old one. A widget that takes keys itself (a text field, a
        select's search, the :class:`~sparsify_tui.tui.widgets.dialogs.KeyBuffer`) still gets them first.

        A key read while a tab's widgets are being mounted (:meth:`keys_wait_for`) waits for them first. A key still
        on its way when the app closes (its screens are gone) is dropped."""
        if isinstance(event, events.Key) and self.closing:
            return
        if isinstance(event, events.Key) and not event.is_forwarded and self._key_waits:
            await asyncio.wait(list(self._key_waits), timeout=self.KEY_WAIT_SECONDS)
        if isinstance(event, events.Key) and not event.is_forwarded:
            keys = escape_then_key(event)
            if keys is not None:
                for key in keys:
                    await self.on_event(key)
                return
        if isinstance(event, events.Key) and not event.is_forwarded and self.screen.maximized is None:
            target = self.focused or self.screen
            if not takes_keys(target, event):
                self.app_focus = True
                if await self._check_bindings(event.key, priority=True) or await self._check_bindings(event.key):
                    return
        await super().on_event(event)

    def keys_wait_for(self, task: "asyncio.Future") -> None:
        """The keys read until ``task`` is done wait for it (at most :attr:`KEY_WAIT_SECONDS`), then go on in the order
        typed: a lazy tab's widgets being mounted (:meth:`sparsify_tui.tui.widgets.tabs.ViewTabs.build`), so the key
        after the one that opened the tab reaches the tab's widget, not the one the focus was on before."""
        self._key_waits.add(task)
        task.add_done_callback(self._key_waits.discard)

    async def _on_app_blur(self, event: events.AppBlur) -> None:
        """The terminal window or the browser page lost the focus: the focused widget keeps it, so the footer still
        shows what the keys do there. Textual's own handler takes the focus away until the window gets it back,
        and ``sparsify-tui serve`` starts in a page that has not been clicked yet: its footer lacked n, d and
        Filter until a click (issue 24)."""
        event.prevent_default()  # not App._on_app_blur

    # -- layout ---------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="◆")
        yield SectionBar(id="section-bar")
        with ContentSwitcher(initial="projects", id="sections"):
            yield ProjectsSection(id="projects")
        yield KeysFooter()  # one line of text (ctrl+p is an ordinary binding: it fits 80 cols)

    def on_mount(self) -> None:
        self._name_keymap_problems(self._user_keymap.problems)
        self.call_after_refresh(self._preload_sections)
        self.set_interval(self.WATCH_SECONDS, self._watch_project)
        self._update_chrome()
        if self._start_project:
            self._find_start_project(self._start_project)
        elif self._start_model:
            self._open_model(self._start_model)
        else:
            self.call_after_refresh(self._focus_section, "projects")

    def _preload_sections(self) -> None:
        """After the first frame, import the sections' modules and the core modules their workers use
        (:data:`PRELOAD_CORE`) in a thread: the Projects screen does not wait for them (cold start), and opening a
        project rarely does (they are imported by then). Then every object alive (modules, the app, its first
        screen: all kept for the session) is moved out of the cyclic garbage collector's reach (``gc.freeze``): a
        full collection no longer walks them, and one fell inside most key presses that build a view (40-125 ms of
        opening a project, a section or Layer Results on a 1,500-node model; 10-40 ms after). Once per process (a
        second app in the same process, as in tests, would freeze the first one's garbage for good)."""
        import gc
        import importlib
        import threading

        def preload() -> None:
            # what opening a project needs first (its Performance section reads the perf profile), then the rest
            first = [SECTION_CLASSES["perf"][0]] + PRELOAD_CORE
            for module in first + [m for m, _name in SECTION_CLASSES.values() if m not in first]:
                try:
                    importlib.import_module(module)
                except Exception:  # noqa: BLE001 - the section reports it when it is opened
                    break
            try:  # the dialogs' runtime choices (importing the runtimes takes about a second)
                from sparsify_tui.tui.widgets.runtimes import single_runtimes

                single_runtimes()
            except Exception:  # noqa: BLE001 - a dialog reports it when it asks
                pass
            if self._user_keymap.entries:  # every binding id now declared: name the ones nothing declares
                from sparsify_tui.tui.keymap import declared_ids

                try:
                    self.call_from_thread(self._check_keymap_ids, declared_ids())
                except Exception:  # noqa: BLE001 - the app closed meanwhile
                    pass
            if gc.get_freeze_count() == 0:
                gc.freeze()

        threading.Thread(target=preload, name="preload-sections", daemon=True).start()

    def on_resize(self) -> None:
        self._update_chrome()

    def _update_chrome(self) -> None:
        # the bar is on the app's first screen, under any dialog (a project renamed by the CLI while one is open)
        for bar in (b for screen in self.screen_stack for b in screen.query(SectionBar)):
            bar.show(self.section, self.project_id is not None)
        from sparsify_tui.formatting import safe_line

        name = self.project_name()
        self.sub_title = f"project: {safe_line(name)}" if name else "no project open"

    def project_name(self) -> Optional[str]:
        """The open project's name (its id until the name is read), None when no project is open."""
        if self.project_id is None:
            return None
        return self._project_name or self.project_id

    @app_work(group="app-project", description="read the open project")
    def _load_project(self, project_id: str) -> None:
        try:
            project = self.workspace.get_project(project_id)
        except Exception:  # the header then shows the id; the sections report their own read errors
            project = {"id": project_id, "name": project_id}
        post_result(self, messages.ProjectLoaded(project))

    @on(messages.ProjectLoaded)
    def _on_project_loaded(self, message: messages.ProjectLoaded) -> None:
        if message.project.get("id") == self.project_id:
            self._project_name = message.project.get("name")
            self._update_chrome()

    # -- keymap ---------------------------------------------------------------------------
    def _apply_user_keymap(self) -> None:
        """Remap keys from `$SPARSIFY_TUI_KEYMAP` or `<workspace>/keymap.json` ({binding id: "key,key"}), read and
        checked by :func:`sparsify_tui.tui.keymap.read_keymap` (a regular file of at most 64 KiB; reserved keys,
        unknown key names and app-wide keys refused): what it refuses is named once on start (:meth:`on_mount`)."""
        from sparsify_tui.tui.keymap import keymap_path, read_keymap

        self._user_keymap = read_keymap(keymap_path(self.workspace.root), self._app_bindings())
        self._keymap_named: set = set()
        if self._user_keymap.entries:
            self.set_keymap(dict(self._user_keymap.entries))

    def _app_bindings(self) -> list:
        """The bindings that work everywhere: this app's and Textual's own app-level ones."""
        out = []
        for klass in reversed(type(self).__mro__):
            out.extend(b for b in klass.__dict__.get("BINDINGS", []) if isinstance(b, Binding))
        return out

    def _name_keymap_problems(self, problems) -> None:
        """Each keymap problem as a notification, once per app."""
        for line in problems:
            if line not in self._keymap_named:
                self._keymap_named.add(line)
                self.notify(line, title="keymap.json", severity="warning", timeout=20, markup=False)

    def _check_keymap_ids(self, ids: set) -> None:
        """Once the sections are imported: name (and drop) keymap entries whose id nothing declares."""
        from sparsify_tui.tui.keymap import unknown_ids

        problems = unknown_ids(self._user_keymap, ids)
        if problems:
            self.set_keymap(dict(self._user_keymap.entries))
            self._name_keymap_problems(problems)

    def handle_bindings_clash(self, clashed_bindings: set, node) -> None:
        """A keymap entry moved a binding onto the key of another binding of the same place, which Textual then
        dropped: the entry goes (both keep their default keys) and is named once."""
        keys = {normalize for b in clashed_bindings for normalize in str(b.key).split(",")}
        culprits = [bid for bid, value in self._user_keymap.entries.items()
                    if set(value.split(",")) & keys and bid not in {b.id for b in clashed_bindings}]
        if not culprits:
            return
        lines = []
        for bid in culprits:
            value = self._user_keymap.entries.pop(bid)
            other = next(b for b in clashed_bindings if set(str(b.key).split(",")) & set(value.split(",")))
            lines.append(f"keymap {self._user_keymap.path}: {bid!r} -> {value!r} is refused: it is the key of "
                         f"{other.description or other.action} ({other.id or other.key}) there; choose another key "
                         "(it keeps its default)")
        self.set_keymap(dict(self._user_keymap.entries))
        self._name_keymap_problems(lines)

    # -- sections -------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple) -> Optional[bool]:
        if action == "show_section" and parameters and parameters[0] != "projects" and self.project_id is None:
            return None  # shown greyed out; pressing it explains why
        if action == "leave_field":  # in the footer only while a text field of a section takes the keys typed
            from textual.screen import ModalScreen

            focused = self.focused
            return (focused is not None and not isinstance(self.screen, ModalScreen)
                    and getattr(focused, "editing", None) is None and focused.check_consume_key("a", "a"))
        if action == "report" and self.project_id is None:
            return None
        return True

    def action_show_section(self, section: str) -> None:
        """Show a section (1-6). Project sections need an open project."""
        if section not in SECTION_LABELS:
            return
        if section != "projects" and self.project_id is None:
            self.notify("Open a project first: select it in Projects (1) and press enter, or press n for a new one.",
                        severity="warning", timeout=4)
            section = "projects"
        switcher = self.query_one("#sections", ContentSwitcher)
        mounting = None
        if section != "projects" and not switcher.query(f"#{section}"):
            mounting = switcher.mount(section_class(section)(self.project_id, id=section))
        switcher.current = section
        if section == "projects" and self.section != "projects":
            self.query_one(ProjectsSection).reload()  # pick up projects made by the CLI meanwhile
        self.section = section
        self._update_chrome()
        if mounting is None:
            self._focus_section(section)
            self.call_later(self._watch_project)  # shown again: its data as it is now
        else:
            self.call_later(self._focus_when_mounted, mounting, section)

    async def _focus_when_mounted(self, mounting: Any, section: str) -> None:
        if mounting is not None:
            await mounting
        if self.section == section:
            self._focus_section(section)

    def _focus_section(self, section: str) -> None:
        try:
            widget = self.query_one(f"#sections > #{section}")
        except Exception:
            return
        focus_default = getattr(widget, "focus_default", None)
        if callable(focus_default):
            try:
                focus_default()
                return
            except Exception:  # a section still composing: fall back to the first focusable widget
                pass
        for child in widget.query("*"):
            if child.focusable:
                child.focus()
                return
        self.set_focus(None)

    # -- current data: the section on screen follows what any process writes ----------------------------
    async def _watch_project(self) -> None:
        """Read the open project's change stamp (:meth:`~sparsify_tui.store.Workspace.project_stamp`: one ``stat``,
        in a thread) and have the section on screen read its data again when it was read at another stamp
        (:meth:`_refresh_section`). Every write to the project changes the stamp: a job's record (from this TUI, the
        CLI or another TUI), an edit made in another section or another process, saved settings. Runs every
        :attr:`WATCH_SECONDS` and when a section is shown; a section out of view is read when it is shown again."""
        pid = self.project_id
        if pid is None or self._stamp_reading:
            return
        self._stamp_reading = True
        try:
            stamp = await asyncio.to_thread(self.workspace.project_stamp, pid)
        finally:
            self._stamp_reading = False
        if pid != self.project_id:
            return
        if stamp != self._stamp and self._stamp is not None:
            self._load_project(pid)  # renamed from the CLI: the header follows
        self._stamp = stamp
        self._refresh_section()

    @property
    def closing(self) -> bool:
        """The app is ending (``exit()`` called, or shutting down: its screens are being closed): a key or a watch
        tick still on its way is dropped."""
        return self._exit or not self._running or not self._screen_stack

    def _refresh_section(self) -> None:
        """The section on screen reads its data again (its ``reload_data()``) when its ``data_stamp`` (the stamp its
        load worker read before reading) is not the project's stamp now; nothing for an up-to-date one."""
        if self.closing:
            return  # its sections' fields are being removed (a tick may land meanwhile)
        widget = self.current_section_widget()
        if self.section == "projects" or widget is None or not widget.is_mounted or self._stamp is None:
            return
        reload = getattr(widget, "reload_data", None)
        if callable(reload) and getattr(widget, "data_stamp", None) != self._stamp:
            widget.data_stamp = self._stamp  # read again once, not on every tick until its worker is done
            reload()

    def current_section_widget(self) -> Optional[Widget]:
        try:
            return self.query_one(f"#sections > #{self.section}")
        except Exception:
            return None

    def open_project(self, project_id: str, section: str = "perf", name: Optional[str] = None) -> None:
        """Open a project (its sections are rebuilt) and show `section`. `name`: shown in the header (read
        from the workspace in a worker when not given)."""
        switcher = self.query_one("#sections", ContentSwitcher)
        for sid, _label, _short in SECTIONS[1:]:
            for old in switcher.query(f"#{sid}"):
                old.remove()
        self.project_id = project_id
        self._project_name = name
        self._stamp = None
        if name is None:
            self._load_project(project_id)
        self._update_chrome()
        self.call_after_refresh(self.action_show_section, section)

    def close_project(self) -> None:
        switcher = self.query_one("#sections", ContentSwitcher)
        switcher.current = "projects"
        for sid, _label, _short in SECTIONS[1:]:
            for old in switcher.query(f"#{sid}"):
                old.remove()
        self.project_id = None
        self._project_name = None
        self.section = "projects"
        self._update_chrome()

    @on(messages.OpenProject)
    def _on_open_project(self, message: messages.OpenProject) -> None:
        if message.project_id == self.project_id and self.project_id is not None:
            self.action_show_section(message.section)  # already open: keep its sections as they are
        else:
            self.open_project(message.project_id, message.section, name=message.name)

    @on(messages.ShowSection)
    def _on_show_section(self, message: messages.ShowSection) -> None:
        self.action_show_section(message.section)

    @on(messages.ProjectsChanged)
    def _on_projects_changed(self, message: messages.ProjectsChanged) -> None:
        if message.deleted and message.project_id == self.project_id:
            self.close_project()
        elif self.project_id is not None and message.project_id in (None, self.project_id):
            self._load_project(self.project_id)  # renamed: the header follows
        self._update_chrome()
        self.query_one(ProjectsSection).reload()
        if message.deleted:
            self.action_show_section("projects")

    # -- actions --------------------------------------------------------------------------
    def action_leave_field(self) -> None:
        """escape in a text field that takes the keys typed (not a section's field: escape reverts its edit): move
        focus to the closest focusable container (keys work again)."""
        focused = self.focused
        if focused is None:
            return
        for ancestor in focused.ancestors:
            if isinstance(ancestor, Widget) and ancestor.focusable and ancestor is not focused:
                ancestor.focus()
                return
        self.set_focus(None)

    def action_toggle_list(self) -> None:
        """`z`: hide (or show again) the list pane of every section and comparison (app.tcss ``.list-pane``); the
        focus leaves a hidden list for the view."""
        self.toggle_class("-list-collapsed")
        collapsed = self.has_class("-list-collapsed")
        focused = self.focused
        if collapsed and focused is not None and any(a.has_class("list-pane") for a in focused.ancestors_with_self):
            widget = self.current_section_widget()
            view = getattr(widget, "current_view", lambda: None)() if widget is not None else None
            target = next((w for w in (view.query("*") if view is not None else []) if w.focusable), None)
            if target is None and widget is not None:
                target = next((w for w in widget.query("*") if w.focusable and not any(
                    a.has_class("list-pane") for a in w.ancestors_with_self)), None)
            self.set_focus(target)
        self.notify("List pane hidden: z shows it again." if collapsed else "List pane shown.", timeout=2)

    def action_help(self) -> None:
        from sparsify_tui.tui.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.focused))  # the keys of the focused section come first

    def action_jobs(self) -> None:
        """`j`: the Jobs view (every job of every project)."""
        from sparsify_tui.tui.jobs import JobsScreen

        if not isinstance(self.screen, JobsScreen):
            self.push_screen(JobsScreen())

    def action_section_action(self, section: str, action: str) -> None:
        """Show ``section`` of the open project and run its ``action_<action>`` once it is mounted (the command
        palette's actions)."""
        if self.project_id is None:
            self.action_show_section(section)  # explains that a project must be opened first
            return
        self.action_show_section(section)

        async def run_when_mounted() -> None:
            for _ in range(100):
                widget = self.current_section_widget()
                if widget is not None and self.section == section and widget.is_mounted \
                        and hasattr(widget, f"action_{action}"):
                    await widget.run_action(action)
                    return
                await asyncio.sleep(0.02)

        self.call_later(run_when_mounted)

    def action_new_project(self, model_path: str = "") -> None:
        from sparsify_tui.tui.new_project import NewProjectDialog

        dialog = NewProjectDialog(model_path=model_path)

        def done(project_id: Optional[str]) -> None:
            self.query_one(ProjectsSection).reload()
            if project_id:
                self.open_project(project_id, name=(dialog.project or {}).get("name"))

        self.push_screen(dialog, done)

    def action_report(self) -> None:
        """`w`: the Report dialog of the open project (:mod:`sparsify_tui.tui.report`)."""
        from sparsify_tui.tui.report import ReportDialog

        if self.project_id is not None and not isinstance(self.screen, ReportDialog):
            self.push_screen(ReportDialog(self.project_id))

    def hold_keys(self) -> None:
        """A dialog is coming (its data is being read in a worker): the keys typed meanwhile wait for it
        (:class:`~sparsify_tui.tui.widgets.dialogs.KeyBuffer`) instead of reaching the section under it. Pair with
        :meth:`show_dialog`; a worker failure lets them go (:meth:`on_worker_state_changed`)."""
        from sparsify_tui.tui.widgets.dialogs import KeyBuffer

        if not isinstance(self.screen, KeyBuffer):
            self._key_buffer = KeyBuffer()
            self.push_screen(self._key_buffer)

    def show_dialog(self, dialog: Any, callback: Any = None) -> None:
        """Push ``dialog`` (with ``callback``) and hand it the keys :meth:`hold_keys` held, in the order typed; nothing
        when the user gave up the dialog with escape while waiting."""

        held, self._key_buffer = self._key_buffer, None
        if held is not None and held.cancelled:
            return  # given up with escape while it was coming (or it took too long)
        if held is not None:
            held.cancelled = True  # its timer does nothing now
            if held is self.screen:
                self.pop_screen()
            elif held in self.screen_stack:
                return  # an error dialog came on top: this one is dropped
        mounting = self.push_screen(dialog, callback)

        async def replay() -> None:
            await mounting
            for key, character in (held.keys if held is not None else []):
                self.post_message(events.Key(key, character))

        self.call_later(replay)

    def release_keys(self) -> None:
        """No dialog is coming after all: the held keys are dropped."""
        from sparsify_tui.tui.widgets.dialogs import KeyBuffer

        for screen in [s for s in self.screen_stack if isinstance(s, KeyBuffer)]:
            screen.give_up()

    def action_quit(self) -> None:
        self.exit(0)

    def notify(self, message: str, *, title: str = "", severity: Any = "information", timeout: Optional[float] = None,
               markup: bool = True) -> None:
        """Textual's notification, with every word that is wider than the toast elided in its middle (a path keeps
        its file name): the toast folded such a word across two lines ("budget-1.o" / "nnx")."""
        from sparsify_tui.tui.widgets.labels import fit_words

        width = min(TOAST_WIDTH, self.size.width // 2) - TOAST_FRAME
        super().notify(fit_words(message, width), title=title, severity=severity, timeout=timeout, markup=markup)

    def show_error(self, error: Any, title: str = "Error") -> None:
        """Show an exception or message in the error dialog (the app stays up). The same message already on
        screen is not stacked again (a list that fails on every poll shows one dialog, not one per poll)."""
        text = error if isinstance(error, str) else error_message(error)
        if any(isinstance(s, ErrorDialog) and s.message == text for s in self.screen_stack):
            return
        self.push_screen(ErrorDialog(text, title=title))

    # -- the one place worker failures are reported ---------------------------------------------
    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A worker raised: the error dialog (the app stays up), then :class:`messages.WorkFailed` to the
        widget that started it. Every store, job and core call runs in an App-owned worker
        (:func:`sparsify_tui.tui.workers.app_work`), so every failure comes here; results arrive as the
        typed messages the workers post."""
        if event.state != WorkerState.ERROR:
            return
        worker = event.worker
        origin = getattr(worker, "origin", None)
        if origin is not None and origin is not self and not origin.is_attached:
            return  # its widget is gone (another project opened, dialog closed): nobody to tell
        self.release_keys()  # a dialog whose data it was reading is not coming
        self.show_error(worker.error)
        if origin is not None and origin is not self:
            origin.post_message(messages.WorkFailed(worker.group, worker.error))

    # -- start-up helpers -----------------------------------------------------------------
    @app_work(group="start", description="find the project to open")
    def _find_start_project(self, ref: str) -> None:
        """`sparsify-tui --project REF`: the project by id or name (an unknown one: the error dialog)."""
        post_result(self, messages.StartProjectFound(self.workspace.get_project(ref)))

    @app_work(group="start", description="open model")
    def _open_model(self, model: str) -> None:
        """`sparsify-tui MODEL.onnx`: open the project of that model (same file or sha256); for a new model, the
        New Project dialog with the path filled in (it offers the baseline profiles and asks for dims)."""
        from sparsify_tui.services.projects import find_project_for_model

        project = find_project_for_model(self.workspace, model)
        if project is None:
            from sparsify_tui.tui.new_project.dialog import inspect_model

            inspect_model(str(model))  # a bad model: its one-line error in the error dialog, nothing opened
            # a new model: the New Project dialog, filled in, offers its baseline profiles (and asks for dims)
            post_result(self, messages.ModelNeedsDims(str(model)))
            return
        post_result(self, messages.StartProjectFound(project))

    @on(messages.StartProjectFound)
    def _on_start_project_found(self, message: messages.StartProjectFound) -> None:
        self.open_project(message.project["id"], name=message.project.get("name"))

    @on(messages.ModelNeedsDims)
    def _on_model_needs_dims(self, message: messages.ModelNeedsDims) -> None:
        self.action_new_project(message.model_path)


#: the cyclic garbage collector's full collection runs at most once per this many collections of the middle
#: generation (CPython's default: 10). A full collection walks every object a loaded project holds (its profiles,
#: the model analysis, the sections' widgets: 30-160 ms with a 1,500-node model on a shared 2-core machine), and
#: with the default one fell inside a key press several times a session (a dozen section switches and Layer Results:
#: 4 of them); with 100, none. Cyclic garbage waits longer for its collection (a full collection still runs every
#: ~700,000 net allocations), which the TUI's few MB of it per project afford.
GC_FULL_EVERY = 100


def tune_gc() -> None:
    """Make full garbage collections rarer in the TUI process (:data:`GC_FULL_EVERY`; set by :func:`run_app`, not by
    an app made in another program's process, such as a test's)."""
    import gc

    young, middle, full = gc.get_threshold()
    gc.set_threshold(young, middle, max(full, GC_FULL_EVERY))


def run_app(model: Optional[str] = None, project: Optional[str] = None, mouse: bool = True) -> int:
    """Run the TUI (blocking). `model`: an .onnx path to create-or-open; `project`: id or name to open."""
    tune_gc()
    app = SparsifyApp(model=model, project=project)
    app.run(mouse=mouse)
    return int(app.return_code or 0)
