"""The measuring lock never follows a planted link nor damages someone else's file (issue 11, item 2).

These tests use their own lock paths (never the shared ``$SPARSIFY_TUI_MEASURE_LOCK`` of the test run).
"""

from __future__ import annotations

import os
import stat

import pytest

from sparsify_tui.errors import JobError
from sparsify_tui.jobs.measure_lock import MeasureLock, measure_lock_path

from reliability_helpers import DEMO, assert_refused, run_cli


def _victim(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    os.chmod(victim, 0o600)
    return victim


def _intact(victim) -> None:
    assert victim.read_text() == "precious\n"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600


@pytest.mark.parametrize("plant", ["symlink", "dangling", "hardlink", "fifo"])
def test_planted_lock_path_is_refused_and_left_intact(tmp_path, monkeypatch, plant):
    victim = _victim(tmp_path)
    lock = tmp_path / "locks" / "measure.lock"
    lock.parent.mkdir()
    if plant == "symlink":
        os.symlink(victim, lock)
    elif plant == "dangling":
        os.symlink(tmp_path / "would-be-created", lock)
    elif plant == "hardlink":
        os.link(victim, lock)
    else:
        os.mkfifo(lock)
    monkeypatch.setenv("SPARSIFY_TUI_MEASURE_LOCK", str(lock))
    with pytest.raises(JobError, match="measuring lock"):
        MeasureLock().try_acquire("job 1 ws\n")
    _intact(victim)
    assert not (tmp_path / "would-be-created").exists()


def test_a_cli_job_refuses_a_planted_symlink_in_one_line(tmp_path, workspace_home):
    victim = _victim(tmp_path)
    lock = tmp_path / "planted.lock"
    os.symlink(victim, lock)
    env = {"SPARSIFY_TUI_MEASURE_LOCK": str(lock)}
    r = run_cli("create", DEMO, "--name", "d", "--dim", "x:2=48", "--dim", "x:3=192", home=workspace_home, env=env)
    assert r.code == 0, r.err
    assert_refused(run_cli("profile", "perf", "d", "--iterations", "2", "--warmup", "0", "--no-int8",
                           home=workspace_home, env=env), "symbolic link")
    _intact(victim)
    assert os.path.islink(lock) and os.readlink(lock) == str(victim)


def test_default_lock_is_per_user_in_a_private_folder(tmp_path, monkeypatch):
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.delenv("SPARSIFY_TUI_MEASURE_LOCK", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    assert measure_lock_path() == runtime / "sparsify-tui" / "measure.lock"
    lock = MeasureLock()
    assert lock.try_acquire("job-a 1 ws\n")
    try:
        assert lock.holder() == "job-a"
        folder = runtime / "sparsify-tui"
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert stat.S_IMODE((folder / "measure.lock").stat().st_mode) == 0o600
        other = MeasureLock()
        assert not other.try_acquire("job-b 2 ws\n")  # one measuring job at a time
        assert other.holder() == "job-a"
        other.release()
    finally:
        lock.release()


def test_default_lock_falls_back_to_a_checked_temp_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("SPARSIFY_TUI_MEASURE_LOCK", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "missing"))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    path = measure_lock_path()
    assert path == tmp_path / f"sparsify-tui-{os.geteuid()}" / "measure.lock"
    # someone planted a world-writable folder (or a link) there first: refused, not used
    path.parent.mkdir(mode=0o777)
    os.chmod(path.parent, 0o777)
    with pytest.raises(JobError, match="not a private folder"):
        MeasureLock().try_acquire("j 1 ws\n")
    os.rmdir(path.parent)
    os.symlink(tmp_path, path.parent)
    with pytest.raises(JobError, match="not a private folder"):
        MeasureLock().try_acquire("j 1 ws\n")
    os.unlink(path.parent)
    lock = MeasureLock()
    assert lock.try_acquire("j 1 ws\n")
    lock.release()
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a file owned by another user")
def test_someone_elses_lock_file_is_used_read_only_never_chmod_or_truncated(tmp_path, monkeypatch):
    lock = tmp_path / "shared.lock"
    lock.write_text("theirs\n")
    os.chown(lock, 65534, 65534)
    os.chmod(lock, 0o666)
    monkeypatch.setenv("SPARSIFY_TUI_MEASURE_LOCK", str(lock))
    m = MeasureLock()
    assert m.try_acquire("mine 1 ws\n")
    m.release()
    assert lock.read_text() == "theirs\n"
    assert stat.S_IMODE(lock.stat().st_mode) == 0o666 and lock.stat().st_uid == 65534


def test_an_admin_made_shared_lock_works_read_only(tmp_path, monkeypatch):
    lock = tmp_path / "shared.lock"
    lock.write_text("")
    os.chmod(lock, 0o444)  # users cannot write it; flock on a read-only descriptor still excludes
    monkeypatch.setenv("SPARSIFY_TUI_MEASURE_LOCK", str(lock))
    if os.geteuid() == 0:
        pytest.skip("root can write any file")
    a, b = MeasureLock(), MeasureLock()
    assert a.try_acquire("a 1 ws\n") and not b.try_acquire("b 2 ws\n")
    a.release()
    b.release()
