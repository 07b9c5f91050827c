"""A metric of the user's own: ``--metric FILE.py:FUNCTION`` (the INT8 and budget searches, apply, benchmarks).

The function is called as ``FUNCTION(outputs, reference, labels)`` and returns one number:

* ``outputs``: the scored model's outputs, a list with one array per model output (graph order), the items stacked
  on axis 0 (``[items, ...]``);
* ``reference``: the FP32 (baseline) model's outputs on the same items, in the same form;
* ``labels``: the labels array of those items (any array ``np.load`` reads without pickle, first axis = items: class
  indices, texts as code points padded with -1, boxes padded with -1...), or None when the data has none.

Its direction is the function's attribute ``higher_is_better`` (default True: an accuracy; set it False for an
error rate such as CER). The budget (``--max-drop``) is the allowed **worsening** of the value against the FP32
model's own value on the same items (``FUNCTION(reference, reference, labels)``): a drop when higher is better, a
rise otherwise (:meth:`UserMetric.worsening`).

The file runs in the job process (never in the TUI), loaded once per process and file version: its bytes are read,
hashed (sha256, stored with every record scored by it) and executed as a module named after the hash, so the code
that ran is the code whose hash is stored. Any exception while loading or calling, or a return value that is not
one finite number, is a :class:`~sparsify_tui.errors.MetricError` of one line naming the file and the line.
"""

from __future__ import annotations

import hashlib
import math
import os
import sys
import traceback
import types
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from sparsify_tui.errors import MetricError

_LOADED: Dict[Tuple[str, str], "UserMetric"] = {}  # (path, sha256) -> loaded metric (one per file version)


def _where(err: BaseException, path: str) -> str:
    """``"ctc_text.py line 41"``: the deepest frame of ``err``'s traceback in ``path`` (else the deepest frame)."""
    frames = traceback.extract_tb(err.__traceback__)
    mine = [f for f in frames if os.path.abspath(f.filename) == path]
    f = (mine or frames or [None])[-1]
    if f is None:
        lineno = getattr(err, "lineno", None)
        return f"{os.path.basename(path)}" + (f" line {lineno}" if lineno else "")
    return f"{os.path.basename(f.filename)} line {f.lineno}"


def _why(err: BaseException) -> str:
    text = str(err).splitlines()[0][:160] if str(err) else ""
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


class UserMetric:
    """A loaded metric of the user's own (module docstring). ``path`` (absolute), ``function`` (its name),
    ``sha256`` (of the file's bytes that ran), ``higher_is_better``; call it as the function."""

    def __init__(self, path: str, function: str, sha256: str, fn: Callable, higher_is_better: bool) -> None:
        self.path, self.function, self.sha256, self.fn = path, function, sha256, fn
        self.higher_is_better = bool(higher_is_better)

    @property
    def spec(self) -> str:
        """``/absolute/FILE.py:FUNCTION``: what ``--metric`` is stored as."""
        return f"{self.path}:{self.function}"

    @property
    def file_name(self) -> str:
        return os.path.basename(self.path)

    @property
    def label(self) -> str:
        """The short display name: the function's name (``cer``)."""
        return self.function

    @property
    def direction(self) -> str:
        return "higher is better" if self.higher_is_better else "lower is better"

    @property
    def budget_units(self) -> str:
        """What ``max_drop`` means for it."""
        how = "a drop: higher is better" if self.higher_is_better else "a rise: lower is better"
        return f"allowed worsening of {self.function} vs FP32 ({how}), in its own units"

    def to_dict(self) -> dict:
        """``{"name", "path", "sha256", "higher_is_better"}``: stored with every record scored by it."""
        return {"name": self.function, "path": self.path, "sha256": self.sha256,
                "higher_is_better": self.higher_is_better}

    def worsening(self, value: float, reference_value: float) -> float:
        """The budgeted quantity: ``reference − value`` when higher is better, ``value − reference`` otherwise
        (negative: better than FP32)."""
        return float(reference_value - value) if self.higher_is_better else float(value - reference_value)

    def __call__(self, outputs: Sequence[np.ndarray], reference: Sequence[np.ndarray],
                 labels: Optional[np.ndarray]) -> float:
        """The function's value on these arrays, as a float. Raises ``MetricError`` (one line, file and line)."""
        try:
            value = self.fn(list(outputs), list(reference), labels)
        except Exception as err:  # noqa: BLE001 - the user's code: any exception is one line
            raise MetricError(f"metric {self.function} failed at {_where(err, self.path)} ({_why(err)}): fix "
                              f"{self.file_name}") from None
        return self._number(value)

    def _number(self, value: Any) -> float:
        arr = np.asarray(value) if isinstance(value, (np.ndarray, np.generic)) else None
        if isinstance(value, bool) or value is None or (arr is not None and arr.size != 1) or \
                not isinstance(value, (int, float, np.ndarray, np.generic)):
            shown = f"an array of shape {list(arr.shape)}" if arr is not None else repr(value)[:60]
            raise MetricError(f"metric {self.function} ({self.file_name}) returned {shown}, not one number: return "
                              "a float")
        try:
            v = float(arr.reshape(()) if arr is not None else value)
        except (TypeError, ValueError):
            raise MetricError(f"metric {self.function} ({self.file_name}) returned {value!r:.60}, not one number: "
                              "return a float") from None
        if not math.isfinite(v):
            raise MetricError(f"metric {self.function} ({self.file_name}) returned {v}: return a finite number "
                              "(check for empty inputs or a division by zero)")
        return v


def load_user_metric(spec: str) -> UserMetric:
    """Load ``/path/FILE.py:FUNCTION`` (module docstring; :func:`sparsify_tui.settings.metric` makes the spec).
    Raises ``MetricError`` (the file is gone or unreadable, it raised while loading, ``FUNCTION`` is missing or not
    callable)."""
    path_text, _, function = str(spec).rpartition(":")
    path = os.path.abspath(os.path.expanduser(path_text))
    name = os.path.basename(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as err:
        raise MetricError(f"metric file {path} cannot be read ({err.strerror}): restore it, or give another --metric "
                          "(a built-in one, or FILE.py:FUNCTION)") from None
    sha = hashlib.sha256(data).hexdigest()
    known = _LOADED.get((path, sha))
    if known is not None and known.function == function:
        return known
    mod_name = f"sparsify_user_metric_{sha[:16]}"
    module = types.ModuleType(mod_name)
    module.__file__ = path
    sys.modules[mod_name] = module  # dataclasses and pickling look their module up here
    try:
        code = compile(data, path, "exec")
        exec(code, module.__dict__)  # noqa: S102 - the user's own metric, asked for by --metric
    except SyntaxError as err:
        sys.modules.pop(mod_name, None)
        raise MetricError(f"metric file {name} line {err.lineno}: {err.msg}: fix the file") from None
    except Exception as err:  # noqa: BLE001 - the user's module: any exception is one line
        sys.modules.pop(mod_name, None)
        raise MetricError(f"metric file {name} failed while loading, at {_where(err, path)} ({_why(err)}): fix "
                          "the file") from None
    fn = getattr(module, function, None)
    if not callable(fn):
        raise MetricError(f"metric file {name} has no function {function!r}: give FILE.py:FUNCTION naming one of its "
                          "functions")
    um = UserMetric(path, function, sha, fn, getattr(fn, "higher_is_better", True))
    _LOADED[(path, sha)] = um
    return um


def stack_items(batches: Sequence[Any], name: str) -> np.ndarray:
    """One output's batches (``[batch items, ...]`` each) stacked on axis 0. Raises ``MetricError`` when their
    trailing shapes differ (the metric gets one array per output)."""
    arrays = [np.asarray(b) for b in batches]
    if len(arrays) == 1:
        return arrays[0]
    if any(a.ndim == 0 for a in arrays) or len({a.shape[1:] for a in arrays}) > 1:
        shapes = sorted({str(list(a.shape)) for a in arrays})[:2]
        raise MetricError(f"output '{name}' has a different shape per item ({', '.join(shapes)}): a metric of your "
                          "own gets each output's items stacked on axis 0; pad the model's output to one shape")
    return np.concatenate(arrays, axis=0)


__all__ = ["UserMetric", "load_user_metric", "stack_items"]
