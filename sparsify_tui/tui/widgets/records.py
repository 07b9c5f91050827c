"""`RecordListSection`: what the Performance, Loss and Benchmarks sections share, written once.

Each of them is a list of stored records of one workspace table (perf profiles, loss profiles, benchmarks) with,
under it, the section's running and queued jobs (:class:`~sparsify_tui.tui.widgets.jobs.SectionJobs`), and on the
right the view of the selected record. This base class holds the list and its life cycle:

* **list and refresh**: the records are read in a thread worker when the section mounts, after every change made
  here, and when the project's change stamp moved while the section is shown or before it is shown again (records
  written by the CLI, another TUI or a job appear: :meth:`~sparsify_tui.tui.app.SparsifyApp._watch_project` calls
  :meth:`RecordListSection.reload_data`);
  the options are rebuilt only when a record's signature changed (:meth:`record_signature`), grouped by fleet target;
* **selection**: until the user picks a record, the newest is shown (a profile run from another shell shows up);
  after a job of the section finishes, its record is shown; a deleted record gives way to the fixed entry (FLOPS,
  Approximated) or the newest one. The subclass shows a selection in :meth:`show_selected`, which must be safe to call
  any number of times in one frame (reuse the mounted view: never remove and re-mount a widget with the same id);
* **rerun** (`r`, after a confirmation; the job replaces the record's numbers), **delete** (`d`, after a
  confirmation), **cancel** (`c`, the section's running job; :meth:`SectionJobs.cancel_newest`), and the job
  submission for `n`, each followed under the list.

A subclass sets the class attributes below and implements :meth:`record_option`, :meth:`show_selected`,
:meth:`rerun_question` and :meth:`rerun_args`; it composes :meth:`compose_list` into its left pane.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Optional

from textual import on
from textual.app import ComposeResult
from textual.message import Message
from textual.widget import Widget
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from sparsify_tui.store.workspace import now_iso
from sparsify_tui.tui import messages
from sparsify_tui.tui.widgets import keys
from sparsify_tui.tui.widgets.grouping import grouped_options, target_label
from sparsify_tui.tui.widgets.dialogs import ConfirmDialog
from sparsify_tui.tui.widgets.jobs import JobProgress, SectionJobs, job_title
from sparsify_tui.tui.workers import app_work, post_result


def newest(records: list[dict]) -> Optional[dict]:
    """The record created last (ISO ``created`` strings compare in time order), None for no records."""
    return max(records, key=lambda r: (str(r.get("created") or ""), str(r.get("id")))) if records else None


class RecordView(Widget):
    """Base of the view a :class:`RecordListSection` shows on the right: :meth:`when_mounted` runs a key's action
    (a tab, a focus) once the view is mounted, so a key pressed right after the view appeared is not lost;
    :meth:`with_analysis_nodes` gives a row's record dialog the model analysis' nodes (read when first needed)."""

    @dataclass
    class NodesRead(Message, bubble=False):
        """The model analysis' nodes by node id ({} when the analysis cannot be read), for :meth:`with_analysis_nodes`."""

        nodes: dict

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._after_mount: list[Callable[[], Any]] = []
        self._mounted = False
        #: the model analysis' nodes by id, as read by :meth:`with_analysis_nodes` (None: not read, or to read again)
        self.analysis_nodes: Optional[dict] = None
        self._after_nodes: Optional[Callable[[dict], Any]] = None

    def on_mount(self) -> None:  # Textual runs each class's own on_mount: a subclass's too
        self.call_after_refresh(self._run_after_mount)

    def _run_after_mount(self) -> None:
        self._mounted = True
        calls, self._after_mount = self._after_mount, []
        for call in calls:
            call()

    def when_mounted(self, call: Callable[[], Any]) -> None:
        """Call ``call`` now if the view is mounted and composed, else right after."""
        if self._mounted:
            call()
        else:
            self._after_mount.append(call)

    def with_analysis_nodes(self, project_id: str, call: Callable[[dict], Any]) -> None:
        """Call ``call(nodes)`` with the model analysis' nodes by node id (weights and shapes for a row's record
        dialog): now when they were read, else once a worker read them, the keys typed meanwhile held for the dialog
        ``call`` shows (``App.hold_keys``; ``call`` shows it with ``App.show_dialog``). Read when first needed, not
        with every profile: reading a 1,500-node model's analysis took 40-150 ms of each profile's first show. A
        view sets :attr:`analysis_nodes` back to None when it shows a profile read again (they are read again)."""
        if self.analysis_nodes is not None:
            call(self.analysis_nodes)
            return
        self._after_nodes = call
        self.app.hold_keys()
        self._read_analysis_nodes(project_id)

    @app_work(group="analysis-nodes", description="read the model analysis")
    def _read_analysis_nodes(self, project_id: str) -> None:
        try:
            nodes = {n.get("id"): n for n in (self.app.workspace.analysis_of(project_id).get("nodes") or [])}
        except Exception:  # noqa: BLE001 - the record dialog then shows the profile's own fields
            nodes = {}
        post_result(self, self.NodesRead(nodes))

    @on(NodesRead)
    def _analysis_nodes_read(self, message: "RecordView.NodesRead") -> None:
        self.analysis_nodes = message.nodes
        call, self._after_nodes = self._after_nodes, None
        if call is not None:
            call(message.nodes)


class ViewKeys:
    """Mixin of a :class:`RecordListSection` whose record view takes the view keys: each is forwarded to
    :meth:`current_view` once that view is mounted (:meth:`RecordView.when_mounted`), so a key pressed right
    after the view appeared is not lost. :attr:`VIEW_TABS`: the view's tab ids, in the order ``[`` / ``]`` cycle."""

    VIEW_TABS: ClassVar[tuple[str, ...]] = ()

    def current_view(self) -> Optional[RecordView]:  # pragma: no cover - every section defines it
        raise NotImplementedError

    def _forward(self, action: str, *args) -> None:
        """Run the current view's ``action_<action>(*args)`` once it is mounted (nothing without a view)."""
        view = self.current_view()
        if view is not None:
            view.when_mounted(lambda: getattr(view, f"action_{action}")(*args))

    def action_view_tab(self, tab: str) -> None:
        """The current view's tab ``tab`` (an id of :attr:`VIEW_TABS`)."""
        self._forward("tab", tab)

    def action_cycle_tab(self, step: int) -> None:
        view = self.current_view()
        if view is not None:
            view.when_mounted(lambda: view.action_tab(keys.cycle(list(self.VIEW_TABS), view.current_tab(), step)))


class RecordListSection(Widget):
    """The list / poll / select / rerun / delete / cancel life cycle of a section of stored records (module
    docstring)."""

    #: the workspace table of the records ("perf_profiles")
    TABLE: ClassVar[str] = ""
    #: the app section id: the list polls only while it is shown
    SECTION: ClassVar[str] = ""
    #: what one record is called in questions and notices ("perf profile")
    KIND: ClassVar[str] = ""
    #: the job types shown under the list; RERUN_JOB: the one a rerun submits
    JOB_TYPES: ClassVar[tuple[str, ...]] = ()
    RERUN_JOB: ClassVar[str] = ""
    #: the id of the list (OptionList) and of the jobs pane
    LIST_ID: ClassVar[str] = "records"
    JOBS_ID: ClassVar[str] = "section-jobs"
    #: ``(id, label)`` of a first list entry that is no stored record (the FLOPS profile), or None
    FIXED: ClassVar[Optional[tuple[str, str]]] = None
    #: the key of a finished job's result that names the record it wrote
    RESULT_KEY: ClassVar[str] = "record_id"
    #: width of the list's group headers (fleet targets)
    LIST_WIDTH: ClassVar[int] = 15

    @dataclass
    class Listed(Message, bubble=False):
        """The records of workspace table ``table`` (the section's), as stored (posted by the list worker)."""

        table: str
        records: list
        prefetched: Any = None

    @dataclass
    class Deleted(Message, bubble=False):
        """Record ``record_id`` was deleted from the workspace."""

        record_id: str

    @dataclass
    class JobSubmitted(Message, bubble=False):
        """A job of the section was submitted (``rerun``: it measures a stored record again)."""

        job: dict
        rerun: bool = False

    def __init__(self, project_id: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.project_id = project_id
        self.selected: Optional[str] = None  # a record id, the FIXED id, or None before the list arrives
        self._records: list[dict] = []
        self._signature: Optional[list] = None  # of the records the options show (None: never listed)
        self._user_chose = False  # until the user picks an entry, the newest record is shown
        self._select_after: Optional[str] = None  # record to show once the list has it (a finished job's)
        self.prefetched: Any = None  # what prefetch() read with the last list
        self.data_stamp: Any = None  # the project's change stamp read before the last list (SparsifyApp)
        self._focus_after = False  # and move the focus into its view (the user just made it in a dialog)
        self._picked_at = ""  # when the user last picked an entry (``now_iso``): a job made before it does not jump

    # -- to implement ---------------------------------------------------------------------------------
    def record_option(self, record: dict) -> Option:
        """The list option of one record (its id the record id)."""
        raise NotImplementedError

    def show_selected(self, selected: Optional[str], *, refresh: bool = False, focus: bool = False) -> None:
        """Show ``selected`` (a record id, the FIXED id, or None: nothing) on the right; ``refresh``: read it again
        even if it is shown (a rerun replaced its numbers); ``focus``: move focus into the view once it is shown."""
        raise NotImplementedError

    def rerun_question(self, record: dict) -> str:
        """The confirmation text of `r` for ``record`` (what is measured again, with which settings)."""
        raise NotImplementedError

    def rerun_args(self, ws: Any, record: dict) -> dict:
        """The ``RERUN_JOB`` job args that measure ``record`` again with its settings (runs in a thread worker)."""
        raise NotImplementedError

    # -- what a subclass may change ---------------------------------------------------------------------
    def record_signature(self, record: dict) -> tuple:
        """What the option of a record shows: the options are rebuilt only when a signature changed."""
        return (record.get("id"), record.get("name"), record.get("modified"), target_label(record))

    def sort_records(self, records: list[dict]) -> list[dict]:
        """The list order (default: as stored, oldest first)."""
        return list(records)

    def job_finished(self, job: dict) -> None:
        """After the list's reaction to a finished job of the section (a notice, the error dialog)."""

    # -- composition ----------------------------------------------------------------------------------
    def compose_list(self) -> ComposeResult:
        """The list (with the FIXED entry) and the jobs pane under it."""
        fixed = [Option(self.FIXED[1], id=self.FIXED[0])] if self.FIXED else []
        yield OptionList(*fixed, id=self.LIST_ID)
        yield SectionJobs(self.project_id, self.JOB_TYPES, section=self.SECTION, id=self.JOBS_ID)

    def on_mount(self) -> None:
        self.reload()

    @property
    def option_list(self) -> OptionList:
        return self.query_one(f"#{self.LIST_ID}", OptionList)

    @property
    def jobs_pane(self) -> SectionJobs:
        return self.query_one(f"#{self.JOBS_ID}", SectionJobs)

    def focus_default(self) -> None:
        self.option_list.focus()

    def action_focus_list(self) -> None:
        self.app.remove_class("-list-collapsed")  # `p` shows the list again if `z` hid it
        self.focus_default()

    # -- the list ---------------------------------------------------------------------------------------
    @property
    def records(self) -> list[dict]:
        """The stored records the list shows, in list order."""
        return list(self._records)

    def selected_record(self) -> Optional[dict]:
        """The selected stored record (None for the FIXED entry or nothing)."""
        return next((r for r in self._records if str(r.get("id")) == self.selected), None)

    def reload(self) -> None:
        """Read the records again (thread worker); the list follows."""
        self._load_records()

    def reload_data(self) -> None:
        """The project changed on disk (the app's change-stamp watch): read the records again."""
        self.reload()

    @app_work(group="record-list", description="list records")
    def _load_records(self) -> None:
        ws = self.app.workspace
        self.data_stamp = ws.project_stamp(self.project_id)
        records = ws.list_records(self.project_id, self.TABLE)
        post_result(self, self.Listed(self.TABLE, records, self.prefetch(ws, records)))

    def prefetch(self, ws: Any, records: list[dict]) -> Any:
        """What the view will need, read in the list's worker (thread) with the list: the record that will be shown
        (the newest, until the user picks one), so opening a section waits for one worker, not two. Default:
        nothing."""
        return None

    @on(Listed)
    def _listed(self, message: "RecordListSection.Listed") -> None:
        message.stop()
        self.prefetched = message.prefetched
        self.show_records(message.records)

    @on(messages.WorkFailed)
    def _list_failed(self, message: messages.WorkFailed) -> None:
        if message.group == "record-list" and self.selected is None and self.FIXED:
            self.select(self.FIXED[0])  # the error dialog says why; the fixed entry needs no record

    def show_records(self, records: list[dict]) -> None:
        """Show ``records`` (as stored) in the list and pick what the view shows (module docstring)."""
        records = self.sort_records(records)
        signature = [self.record_signature(r) for r in records]
        changed = signature != self._signature
        before = {str(sig[0]): sig for sig in self._signature or []}
        self._signature = signature
        self._records = records
        ids = ([self.FIXED[0]] if self.FIXED else []) + [str(r["id"]) for r in records]
        options = self.option_list
        if changed:
            options.clear_options()
            if self.FIXED:
                options.add_option(Option(self.FIXED[1], id=self.FIXED[0]))
            options.add_options(grouped_options(records, self.record_option, width=self.LIST_WIDTH))
        refresh = focus = False
        if self._select_after in ids:  # a finished job's record: read it again (a rerun replaced its numbers)
            target, refresh, self._select_after = self._select_after, True, None
            focus, self._focus_after = self._focus_after, False
        elif not self._user_chose and records:
            target = str(newest(records)["id"])
        elif self.selected in ids:
            target = self.selected
        else:
            target = ids[0] if ids else None
        # read it again when its record changed (a rerun from another shell)
        refresh = refresh or any(str(sig[0]) == target and before.get(target) not in (None, sig) for sig in signature)
        self.select(target, refresh=refresh, focus=focus)
        if target is not None:
            index = options.get_option_index(target)
            if changed or options.highlighted != index:
                options.highlighted = index
        if getattr(self.app, "section", None) == self.SECTION and self.screen.focused is None:
            self.focus_default()  # nothing had the focus (the focused widget went away): the list takes it

    def show_when_listed(self, record_id: str, *, focus: bool = False) -> None:
        """Show record ``record_id`` once the list has it (it was just made), with the focus in its view when
        ``focus`` (the user made it in a dialog); the list is read again now."""
        self._user_chose = True
        self._select_after, self._focus_after = record_id, focus
        self.reload()

    def select(self, selected: Optional[str], *, refresh: bool = False, focus: bool = False) -> None:
        """Show ``selected`` (record id or FIXED id); only a change, a ``refresh`` or a ``focus`` reaches
        :meth:`show_selected`."""
        if selected == self.selected and not refresh and not focus:
            return
        self.selected = selected
        self.refresh_bindings()  # rerun/delete are enabled by the selection (check_action)
        self.show_selected(selected, refresh=refresh, focus=focus)

    @on(OptionList.OptionSelected)
    def _option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_list.id != self.LIST_ID:
            return
        event.stop()
        self._user_chose = True
        # the user's pick wins over a job's record still to be shown when it is listed (show_when_listed) and over
        # one of a job made before the pick when it finishes (_section_job_finished)
        self._select_after, self._focus_after = None, False
        self._picked_at = now_iso()
        self.select(str(event.option.id), focus=True)

    # -- rerun / delete / cancel / submit --------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple) -> Optional[bool]:
        if action in ("rerun", "delete") and self.selected_record() is None:
            return None  # nothing stored is selected (FLOPS, Approximated, an empty list)
        if action == "cancel_job":
            return bool(self.jobs_pane.active) if self.is_mounted else False
        return True

    def action_rerun(self) -> None:
        """`r`: after a confirmation, measure the selected record again with its settings (a job; its numbers
        replace the record's when it finishes)."""
        record = self.selected_record()
        if record is not None:
            title = f"Rerun {record.get('name') or record['id']}"
            self._confirm(record, ConfirmDialog(self.rerun_question(record), confirm_label="Rerun", title=title),
                          self._submit_rerun)

    def _confirm(self, record: dict, dialog: ConfirmDialog, then: Callable[[dict], Any]) -> None:
        self.app.push_screen(dialog, lambda yes: then(record) if yes else None)

    @app_work(group="record-rerun", description="rerun")
    def _submit_rerun(self, record: dict) -> None:
        from sparsify_tui import jobs

        ws = self.app.workspace
        job = jobs.submit(ws, self.project_id, self.RERUN_JOB, self.rerun_args(ws, record))
        post_result(self, self.JobSubmitted(job, rerun=True))

    def submit_job(self, job_type: str, args: dict) -> None:
        """Submit a job of the section (thread worker); it is followed under the list."""
        self._submit(job_type, args)

    @app_work(group="record-submit", description="submit job", exclusive=False)
    def _submit(self, job_type: str, args: dict) -> None:
        from sparsify_tui import jobs

        post_result(self, self.JobSubmitted(jobs.submit(self.app.workspace, self.project_id, job_type, args)))

    @on(JobSubmitted)
    def _job_submitted(self, message: "RecordListSection.JobSubmitted") -> None:
        message.stop()
        self.follow_job(message.job)
        what = "Rerun started" if message.rerun else f"The {job_title(message.job)} job started"
        self.notify(f"{what}: its progress shows under the list (c cancels; it keeps running if you quit).",
                    timeout=4)

    def follow_job(self, job: dict) -> None:
        """Show a job of the section under the list (right after it was submitted)."""
        self.jobs_pane.follow(job)

    def action_cancel_job(self) -> None:
        self.jobs_pane.cancel_newest()

    def action_delete(self) -> None:
        """`d`: after a confirmation, delete the selected record and its stored result."""
        record = self.selected_record()
        if record is not None:
            self._confirm(record, ConfirmDialog(f"Delete {self.KIND} {record.get('name') or record['id']!r} and its "
                                                "stored results?"), lambda r: self._delete(str(r["id"])))

    @app_work(group="record-delete", description="delete record")
    def _delete(self, record_id: str) -> None:
        self.app.workspace.delete_record(self.project_id, self.TABLE, record_id)
        post_result(self, self.Deleted(record_id))

    @on(Deleted)
    def _deleted(self, message: "RecordListSection.Deleted") -> None:
        message.stop()
        self._user_chose = True  # the fixed entry (or the first record) is shown, not the newest
        self._records = [r for r in self._records if str(r.get("id")) != message.record_id]
        if self.selected == message.record_id:
            self.select(self.FIXED[0] if self.FIXED else None)
        self.reload()

    # -- finished jobs --------------------------------------------------------------------------------
    @on(JobProgress.Finished)
    def _section_job_finished(self, event: JobProgress.Finished) -> None:
        if not isinstance(event.control.parent, SectionJobs):
            return  # a dialog's own progress line
        event.stop()
        job = event.job
        if job.get("status") == "completed":
            record_id = (job.get("result") or {}).get(self.RESULT_KEY)
            # not when the user picked another entry after the job was made (both ``now_iso`` times: they sort)
            if record_id and self._picked_at <= str(job.get("created") or ""):
                self._select_after = str(record_id)
            self.notify(f"The {job_title(job)} job finished.", timeout=3)
        elif job.get("status") == "error":
            self.app.show_error(job.get("error") or "see `sparsify-tui job log " + str(job.get("id")) + "`",
                                title=f"The {job_title(job)} job failed")
        self.job_finished(job)
        self.reload()
