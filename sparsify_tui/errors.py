"""User-facing errors.

Every problem caused by the user's input (a bad model file, wrong sample data, an unknown
project) raises a subclass of :class:`SparsifyError`. Its message is one line that names the
problem and the fix, for example::

    model.onnx is truncated (protobuf parse failed at byte 1024 of 4096): re-export or re-copy the file

The CLI prints it on stderr and exits with code 2; the TUI shows it in a dialog and stays up.
Anything else that escapes is a bug and keeps its traceback.
"""

from __future__ import annotations


class SparsifyError(Exception):
    """Base of every user-facing error. ``str(err)`` is a single line: problem, then fix."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))


class ModelError(SparsifyError):
    """The ONNX model cannot be loaded, checked, or shaped (truncated, not ONNX, missing external data...)."""


class DimensionError(ModelError):
    """A symbolic input dimension has no value: the user must give one (``--dim NAME=VALUE``)."""


class SampleDataError(SparsifyError):
    """User sample data (``.npz``/``.npy``) does not match the model inputs."""


class MetricError(SparsifyError):
    """A metric of the user's own (``--metric FILE.py:FUNCTION``) cannot be loaded, raised an exception, or did not
    return one finite number: the message names the file and the line."""


class ProjectError(SparsifyError):
    """A project cannot be found, created, or changed."""


class RecordNotFound(ProjectError):
    """A profile, optimization, benchmark or job id/name does not exist in the project."""


class JobError(SparsifyError):
    """A background job cannot be started, or it failed."""


class JobCanceled(SparsifyError):
    """Raised inside a job (by :meth:`sparsify_tui.progress.CancelToken.check`) when the user cancels it."""
