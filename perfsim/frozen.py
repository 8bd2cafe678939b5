"""Faster construction and copies of perfsim's frozen dataclasses (``Dims``,
``KernelCost``, ...): one ``predict`` builds and copies them many times (kernels, whole
tiles, padding, the split choice, the phase), and a frozen dataclass's generated
``__init__`` sets its fields one ``object.__setattr__`` call at a time (36 for a
``KernelCost``). :func:`fast_init` gives a class an ``__init__`` with the same signature
that fills the instance dict in one step; :func:`replace` copies without any ``__init__``
(issue 13, ``docs/performance.md``)."""

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
        for key in names - state.keys():    # a field its class builds when first read
            state[key] = getattr(obj, key)
    post_init = getattr(new, "__post_init__", None)
    if post_init is not None:
        post_init()
    return new


class _Factory:
    """The default of a field with a ``default_factory`` (shown as dataclasses shows it)."""

    def __repr__(self) -> str:
        return "<factory>"


#: dataclasses' own marker where it has one, so the signature is the generated one's
_FACTORY = getattr(dataclasses, "_HAS_DEFAULT_FACTORY", _Factory())


def fast_init(cls: type) -> type:
    """Class decorator, applied above ``@dataclass(frozen=True)``: replace the generated
    ``__init__`` by one with the same parameters, defaults and ``__post_init__`` call that
    sets every field through one update of the instance dict — the same instance, built
    without a Python-level ``object.__setattr__`` per field. Classes whose ``__init__`` does
    not take exactly their fields (``init=False``, ``InitVar``, keyword-only fields) or that
    use slots are returned unchanged."""
    fields = dataclasses.fields(cls)
    if _copyable(cls) is None or any(f.kw_only for f in fields):
        return cls
    namespace: dict = {"_FACTORY": _FACTORY}
    params, values = [], []
    for f in fields:
        if f.default is not dataclasses.MISSING:
            namespace[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
            values.append(f"{f.name!r}: {f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"_factory_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_FACTORY")
            values.append(f"{f.name!r}: _factory_{f.name}() if {f.name} is _FACTORY "
                          f"else {f.name}")
        else:
            params.append(f.name)
            values.append(f"{f.name!r}: {f.name}")
    post_init = "\n    self.__post_init__()" if hasattr(cls, "__post_init__") else ""
    source = (f"def __init__(self, {', '.join(params)}):\n"
              f"    self.__dict__.update({{{', '.join(values)}}}){post_init}\n")
    exec(source, namespace)  # noqa: S102 - built from the class's own field names
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    init.__annotations__ = dict(cls.__init__.__annotations__)
    cls.__init__ = init
    _COPYABLE.pop(cls, None)
    return cls
