"""A faster ``dataclasses.replace`` for perfsim's frozen dataclasses (``Dims``,
``KernelCost``): one ``predict`` copies them a few times (whole tiles, padding, the split
choice, the phase), and ``dataclasses.replace`` spends most of that time in the generated
``__init__`` checking and setting every field one by one (issue 13,
``docs/performance.md``)."""

from __future__ import annotations

import dataclasses
import inspect

#: Per dataclass: its field names when :func:`replace` may copy it directly (every field an
#: init field, instances with a ``__dict__``), else ``None`` (``dataclasses.replace``).
#: Keyed by the class: a class's fields never change once it is defined.
_COPYABLE: dict[type, frozenset | None] = {}


def _copyable(cls: type) -> frozenset | None:
    """The field names of ``cls`` when its ``__init__`` takes exactly its fields (no
    ``init=False`` field, no ``InitVar``) and its instances keep them in a ``__dict__``."""
    names = frozenset(f.name for f in dataclasses.fields(cls))
    params = list(inspect.signature(cls.__init__).parameters)[1:]
    if set(params) != names or len(params) != len(names) or "__slots__" in cls.__dict__:
        return None
    return names


def replace(obj, /, **changes):
    """``dataclasses.replace(obj, **changes)``: a new object with ``obj``'s fields, then
    ``changes``, then ``__post_init__`` run as the generated ``__init__`` would run it — the
    same object ``dataclasses.replace`` builds (field defaults never apply: every field is
    given). Falls back to ``dataclasses.replace`` for a class with ``init=False`` fields,
    ``InitVar``\\ s or slots.

    Raises:
        TypeError: a name in ``changes`` is not a field (as ``dataclasses.replace``)."""
    cls = type(obj)
    try:
        names = _COPYABLE[cls]
    except KeyError:
        names = _COPYABLE[cls] = _copyable(cls)
    if names is None:
        return dataclasses.replace(obj, **changes)
    for name in changes:
        if name not in names:
            raise TypeError(f"{cls.__name__}.__init__() got an unexpected keyword argument "
                            f"{name!r}")
    new = object.__new__(cls)
    state = new.__dict__          # frozen: set through the instance dict, as __init__ does
    state.update(obj.__dict__)
    state.update(changes)
    if len(state) != len(names):  # anything kept beside the fields (a cached value) goes
        for key in [k for k in state if k not in names]:
            del state[key]
    post_init = getattr(new, "__post_init__", None)
    if post_init is not None:
        post_init()
    return new
