"""Typed records that map to stored JSON: :class:`JsonRecord`, the one serialization scheme of the records that
services return and the store keeps as dicts (the optimization record, :mod:`sparsify_tui.optimization.record`;
the perf profile's parts, :mod:`sparsify_tui.profiling.perf`).

A leaf module: it imports nothing of sparsify-tui, so every layer may use it.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import MISSING, Field, fields
from typing import Any, ClassVar, Dict, List, Optional, Tuple, Type, TypeVar

T = TypeVar("T", bound="JsonRecord")


def _plain(value: Any) -> Any:
    """A JSON-ready deep copy of ``value`` (records become dicts)."""
    if isinstance(value, JsonRecord):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _default(f: Field) -> Any:
    """The default value of dataclass field ``f`` (``MISSING`` when it has none)."""
    return f.default_factory() if f.default_factory is not MISSING else f.default


class JsonRecord:
    """Mixin for the record dataclasses: JSON keys are the field names, in field order.

    ``_nested``: field name -> record class of a nested object, ``[class]`` for a list of them, or ``{str: class}``
    for an object whose values are records (keyed by level, name...). A field
    ``extra`` (when the class has one) holds unknown keys, written back last; a class without it drops
    them. Fields with ``metadata={"omit_none": True}`` are left out of ``to_dict()`` while None, unless the
    dict they were read from had the key (a stored ``null`` stays ``null``). Fields with
    ``metadata={"tail": True}`` are written with the unknown keys, after the others, in the order the dict they
    were read from had them (the keys the store and later writers appended: ``id``, ``created``, ``applied``...),
    so a stored record writes back byte for byte.

    ``_exact`` (a class attribute): a record read from a dict writes back exactly the keys it was read with, in
    their order, whatever version wrote them (a field read as missing stays missing while it has its default; a
    field set since follows, in field order); a record built in code writes every field but the ``omit_none`` ones that
    are None, and :meth:`keep` names fields written even then.

    ``_base_at`` (a class attribute): record base -> the name of one of the class's own fields; the fields the
    class inherits from that base are written just before it, so that a run of fields two records share (one
    base) can stand in the middle of their keys. Empty: field order (the bases' fields first).
    """

    _nested: ClassVar[Dict[str, Any]] = {}
    _exact: ClassVar[bool] = False
    _base_at: ClassVar[Dict[type, str]] = {}

    def keep(self: T, *names: str) -> T:
        """Write the fields ``names`` even while None (a built record's ``null`` keys); returns self."""
        object.__setattr__(self, "_kept", frozenset(getattr(self, "_kept", ())) | set(names))
        return self

    def to_dict(self) -> Dict[str, Any]:
        if self._exact:
            return self._exact_dict()
        out: Dict[str, Any] = {}
        tail: Dict[str, Any] = {}
        read = getattr(self, "_read_keys", ())
        for f in _key_order(type(self)):
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            if value is None and f.metadata.get("omit_none") and f.name not in read:
                continue
            (tail if f.metadata.get("tail") else out)[f.name] = _plain(value)
        tail = {**_plain(getattr(self, "extra", {})), **tail}
        order = {k: i for i, k in enumerate(read)}
        out.update(sorted(tail.items(), key=lambda kv: order.get(kv[0], len(order))))
        return out

    def _exact_dict(self) -> Dict[str, Any]:
        read = getattr(self, "_read_keys", None)
        kept = getattr(self, "_kept", ())
        out: Dict[str, Any] = {}
        for f in _key_order(type(self)):
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            if f.name not in kept and (value == _default(f) if read is not None and f.name not in read
                                       else value is None and read is None and f.metadata.get("omit_none")):
                continue
            out[f.name] = _plain(value)
        out.update(_plain(getattr(self, "extra", {})))
        if not read:
            return out
        order = {k: i for i, k in enumerate(read)}
        return dict(sorted(out.items(), key=lambda kv: order.get(kv[0], len(order))))

    @classmethod
    def from_dict(cls: Type[T], d: Optional[Dict[str, Any]]) -> T:
        d = d or {}
        names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        kw: Dict[str, Any] = {}
        extra: Dict[str, Any] = {}
        for key, value in d.items():
            if key == "extra" or key not in names:
                extra[key] = copy.deepcopy(value)
                continue
            nested = cls._nested.get(key)
            if isinstance(nested, list) and isinstance(value, list):
                kw[key] = [nested[0].from_dict(v) for v in value]
            elif isinstance(nested, dict) and isinstance(value, dict):
                kw[key] = {k: nested[str].from_dict(v) if isinstance(v, dict) else copy.deepcopy(v)
                           for k, v in value.items()}
            elif nested is not None and not isinstance(nested, (list, dict)) and isinstance(value, dict):
                kw[key] = nested.from_dict(value)
            else:
                kw[key] = copy.deepcopy(value)
        if "extra" in names:
            kw["extra"] = extra
        out = cls(**kw)
        object.__setattr__(out, "_read_keys", tuple(d))  # not a field: equality and repr ignore it
        return out


@functools.lru_cache(maxsize=None)
def _key_order(cls: type) -> Tuple[Field, ...]:
    """``cls``'s fields in the order their keys are written: field order, with the fields inherited from each base
    of ``cls._base_at`` moved just before the field it names (computed once per class)."""
    ordered = fields(cls)
    if not cls._base_at:
        return ordered
    runs = {}
    for base, at in cls._base_at.items():
        names = {g.name for g in fields(base)}
        runs[at] = [f for f in ordered if f.name in names]
    inherited = {f.name for run in runs.values() for f in run}
    out: List[Field] = []
    for f in ordered:
        if f.name not in inherited:
            out += runs.get(f.name, []) + [f]
    return tuple(out)
