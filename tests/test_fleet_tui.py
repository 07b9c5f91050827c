"""Fleet in the TUI through Pilot: lists grouped by target machine, and the Fleet dialog (form errors, the listed
nodes, per-target progress of a job). No Ray cluster: nodes are what the dialog's worker would post, and the job is
a real job process whose record carries target rows; 80x24 snapshots."""

from __future__ import annotations

import copy

import pytest
from conftest import steady
from test_perf_tui import make_app, seed, seeded_profile, wait_for

from sparsify_tui.fleet.cluster import NodeInfo
from sparsify_tui.services.profiles import store_perf_profile

SIZE = (80, 24)
SERVER2 = {"label": "server2", "node_id": "5e2c" * 14, "hostname": "server2", "address": "10.0.0.7",
           "labels": {"cpu": "icelake"}, "cpu_model": "Intel Xeon Platinum 8375C", "cores": 8,
           "instruction_sets": ["AVX2", "AVX512F", "AVX512_VNNI"], "ort_version": "1.32.0"}


@pytest.fixture
def ws(workspace_home, tmp_path, monkeypatch):
    from sparsify_tui.store import Workspace

    monkeypatch.setenv("SPARSIFY_TUI_MEASURE_LOCK", str(tmp_path / "measure.lock"))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return Workspace()


def seed_fleet(ws, demo_model):
    """The demo project with a local profile ("baseline") and one measured on fleet target server2."""
    pid, _prof = seed(ws, demo_model)
    remote = seeded_profile(ws.analysis_of(pid))
    remote.name = "server2 b1 8c"
    remote.core_count = 8
    rec = store_perf_profile(ws, pid, remote, target=copy.deepcopy(SERVER2))
    return pid, rec["record_id"]


def prompts(option_list) -> list[tuple[str, bool]]:
    return [(str(option_list.get_option_at_index(i).prompt), option_list.get_option_at_index(i).disabled)
            for i in range(option_list.option_count)]


async def open_perf(pilot, count: int):
    app = pilot.app
    await wait_for(pilot, lambda: app.section == "perf" and len(app.query_one("#perf").records) == count)
    return app.query_one("#perf")


async def test_perf_list_groups_profiles_by_target_machine(ws, demo_model):
    pid, rid = seed_fleet(ws, demo_model)
    app = make_app(ws, pid)
    async with app.run_test(size=SIZE) as pilot:
        section = await open_perf(pilot, 2)
        rows = prompts(section.query_one("#profiles"))
        assert rows == [("FLOPS", False), ("─ this machine", True), ("baseline (b1, 2c)", False),
                        ("─ server2", True),  # the CPU does not fit the list's width: left out, never cut
                        ("server2 b1 8c (b1, 8c)", False)]
        # the header lines are never selected: down from the local profile lands on the fleet one
        section.focus_default()
        profiles = section.query_one("#profiles")
        profiles.highlighted = 2  # the local profile (the list opens on the newest, the fleet one)
        await pilot.press("down")
        await wait_for(pilot, lambda: profiles.get_option_at_index(profiles.highlighted).id == rid)


def test_snapshot_perf_list_grouped_by_target(ws, demo_model, snap_compare):
    pid, _ = seed_fleet(ws, demo_model)

    async def run_before(pilot):
        await open_perf(pilot, 2)
        await steady(pilot)

    assert snap_compare(make_app(ws, pid), terminal_size=SIZE, run_before=run_before)


async def test_fleet_dialog_form_errors_are_one_line(ws, demo_model):
    from sparsify_tui.tui.fleet import FleetDialog

    pid, _ = seed_fleet(ws, demo_model)
    app = make_app(ws, pid)
    async with app.run_test(size=SIZE) as pilot:
        section = await open_perf(pilot, 2)
        section.focus_default()
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FleetDialog))
        dialog = app.screen
        await pilot.press("ctrl+r")
        error = lambda: str(dialog.query_one("#error").render())  # noqa: E731
        await wait_for(pilot, lambda: "Ray address is empty" in error())
        dialog.query_one("#address").value = "ray://10.0.0.5:10001"
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: error().startswith("Ray address ray://10.0.0.5:10001 is not allowed"))
        dialog.query_one("#address").value = "127.0.0.1:1"  # nothing listens there
        await pilot.press("ctrl+f")
        await wait_for(pilot, lambda: "cannot reach the Ray cluster at 127.0.0.1:1" in error(), timeout=30)
        assert "\n" not in error().strip()
        assert ws.list_jobs() == []  # nothing was submitted


def fake_nodes() -> list[NodeInfo]:
    head = NodeInfo("be2e" * 14, address="10.0.0.5", hostname="head", is_head=True, ray_cpus=0,
                    labels={"role": "driver"}, cpu_model="AMD EPYC 9654", cores=96, instruction_sets=["AVX2", "AVX512F"],
                    ort_version="1.32.0")
    s2 = NodeInfo(SERVER2["node_id"], address="10.0.0.7", hostname="server2", ray_cpus=8, labels={"cpu": "icelake"},
                  cpu_model="Intel Xeon Platinum 8375C", cores=8, instruction_sets=SERVER2["instruction_sets"],
                  ort_version="1.32.0")
    s3 = NodeInfo("7a1b" * 14, address="10.0.0.8", hostname="server3", ray_cpus=4, labels={"cpu": "graviton"},
                  error="could not describe itself: ModuleNotFoundError: No module named 'sparsify_tui'")
    return [head, s2, s3]


async def test_fleet_dialog_lists_nodes_and_follows_each_target(ws, demo_model, snap_compare):
    from textual.widgets import DataTable, SelectionList

    from sparsify_tui import jobs
    from sparsify_tui.tui.fleet import FleetDialog
    from sparsify_tui.tui.fleet.messages import FleetJobSubmitted, FleetNodesFound

    pid, _ = seed_fleet(ws, demo_model)
    app = make_app(ws, pid)
    async with app.run_test(size=SIZE) as pilot:
        section = await open_perf(pilot, 2)
        section.focus_default()
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FleetDialog))
        dialog = app.screen
        dialog.query_one("#address").value = "10.0.0.5:6379"
        dialog.post_message(FleetNodesFound("10.0.0.5:6379", fake_nodes()))
        targets = dialog.query_one("#targets", SelectionList)
        await wait_for(pilot, lambda: targets.option_count == 3)
        # only the node that can measure is chosen: the driver has no CPUs in Ray, server3 cannot run sparsify-tui
        assert list(targets.selected) == [SERVER2["node_id"]]
        lines = [str(targets.get_option_at_index(i).prompt) for i in range(3)]
        assert "no CPUs in Ray" in lines[0] and "AVX512_VNNI" in lines[1] and "cpu=icelake" in lines[1]
        assert "error: could not describe itself" in lines[2]
        assert dialog.values()["targets"] == SERVER2["node_id"]
        status = lambda: str(dialog.query_one("#nodes-status").render())  # noqa: E731
        assert "3 alive nodes at 10.0.0.5:6379, 1 chosen" in status()
        targets.focus()
        await pilot.press("space")  # the first node is highlighted once listed: space toggles it
        await wait_for(pilot, lambda: "2 chosen" in status())
        assert set(targets.selected) == {fake_nodes()[0].node_id, SERVER2["node_id"]}
        await pilot.press("space")
        await wait_for(pilot, lambda: "1 chosen" in status())

        # a running fleet job's target rows (a real job process; the rows as the fleet job writes them)
        job = jobs.submit(ws, pid, "sleep", {"steps": 40, "step_s": 0.1}, measuring=False)
        ws.update_job(job["id"], targets=[
            {"node_id": SERVER2["node_id"], "label": "server2", "status": "completed", "step": "done",
             "fraction": 1.0, "error": None, "record_id": "abc", "name": "server2 b1 8c"},
            {"node_id": "7a1b" * 14, "label": "server3", "status": "error", "step": "", "fraction": 0.4,
             "error": "node server3 died during the measurement"}])
        dialog.post_message(FleetJobSubmitted(ws.get_job(job["id"])))
        await wait_for(pilot, lambda: dialog.query("#target-table") and
                       dialog.query_one("#target-table", DataTable).row_count == 2)
        table = dialog.query_one("#target-table", DataTable)
        assert [str(c) for c in table.get_row_at(0)] == ["server2", "completed", "100", "server2 b1 8c"]
        assert [str(c) for c in table.get_row_at(1)] == ["server3", "error", "40",
                                                         "node server3 died during the measurement"]
        assert not dialog.query_one("#form").display  # the form gives way to the progress
        await wait_for(pilot, lambda: dialog.final is not None, timeout=30)
        assert "Done" in str(dialog.query_one("#error").render())


def test_snapshot_fleet_dialog_with_nodes(ws, demo_model, snap_compare):
    from sparsify_tui.tui.fleet import FleetDialog
    from sparsify_tui.tui.fleet.messages import FleetNodesFound

    pid, _ = seed_fleet(ws, demo_model)

    async def run_before(pilot):
        app = pilot.app
        section = await open_perf(pilot, 2)
        section.focus_default()
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FleetDialog))
        app.screen.query_one("#address").value = "10.0.0.5:6379"
        app.screen.post_message(FleetNodesFound("10.0.0.5:6379", fake_nodes()))
        await wait_for(pilot, lambda: app.screen.query_one("#targets").option_count == 3)
        await steady(pilot)

    assert snap_compare(make_app(ws, pid), terminal_size=SIZE, run_before=run_before)


def test_group_headers_show_what_fits_of_the_target():
    from sparsify_tui.tui.widgets.grouping import group_records, header_text

    assert header_text(SERVER2, 60) == "─ server2 · Intel Xeon Platinum 8375C · AVX512_VNNI"
    assert header_text(SERVER2, 40) == "─ server2 · Intel Xeon Platinum 8375C"
    assert header_text({**SERVER2, "label": "a-very-long-hostname"}, 15) == "─ a-very-long-…"
    assert header_text(None, 15) == "─ this machine"
    local, remote = {"id": "1"}, {"id": "2", "target": SERVER2}
    assert group_records([remote, local]) == [(None, [local]), (SERVER2, [remote])]  # this machine first
