"""GPU what-ifs for sweeps: set or scale any ``GPUSpec`` field.

``{"hbm_bandwidth_bytes_per_s": {"scale": [0.5, 1, 2]}, "sm_count": [100, 132]}`` means
"HBM bandwidth × 0.5, × 1, × 2, each with 100 or 132 SMs": six GPU variants per GPU. A dotted
name addresses one entry of a table field (``tensor_flops_per_clk_per_sm.bf16``,
``features.tma``); scaling a whole table multiplies each of its entries.
"""

from __future__ import annotations

import math
import types
import typing
from dataclasses import dataclass

from perfsim.errors import PerfsimError
from perfsim.gpu import FIELD_RANGES, GPUSpec, mhz_hint, range_text, strict_number

#: GPUSpec fields that describe rather than time a GPU; overriding them makes no what-if.
_NOT_OVERRIDABLE = ("id", "name", "sources", "calibration")


@dataclass(frozen=True)
class Override:
    """One what-if on one field.

    Attributes:
        field: ``GPUSpec`` field, or ``field.key`` for one entry of a table field.
        value: the new value, or the factor when ``scale``.
        scale: multiply the GPU's own value (integers are rounded) instead of setting it.
    """

    field: str
    value: object
    scale: bool = False

    @property
    def top(self) -> str:
        """The GPUSpec field the override changes (``tensor_flops_per_clk_per_sm`` for a
        dotted key)."""
        return self.field.split(".", 1)[0]

    def label(self) -> str:
        """Column label of the override in sweep results."""
        return f"{self.field}×{self.value:g}" if self.scale else f"{self.field}={self.value}"

    def column(self) -> str:
        """DataFrame column that holds :meth:`column_value`."""
        return f"{self.field}_scale" if self.scale else self.field

    def column_value(self):
        """The override's value for one sweep row, as the results column holds it: ``None``
        (the field unset) as NaN, so a column of numbers and unset values is a float column in
        memory and in every file, whichever group a streamed frame holds first (the label in
        the ``overrides`` column still reads ``=None``)."""
        if self.value is None:
            return float("nan")
        return self.value if isinstance(self.value, (int, float, bool, str)) else str(self.value)

    def apply(self, data: dict) -> None:
        """Change ``data`` (a ``GPUSpec.model_dump()``) in place.

        Raises:
            perfsim.PerfsimError: a missing table key, or a scale of a non-number.
        """
        holder, key = data, self.field
        if "." in self.field:
            key_top, key = self.field.split(".", 1)
            holder = data[key_top]
            if holder is None:
                raise PerfsimError(f"GPU override {self.field!r}: {data.get('id', 'this GPU')} "
                                   f"has no {key_top} table (None: not measured there); "
                                   f"set the whole table ({key_top} = {{...}}) instead")
            if not isinstance(holder, dict):
                raise PerfsimError(f"GPU override {self.field!r}: {key_top} is a single "
                                   "value, not a table of entries")
            if key not in holder:
                raise PerfsimError(f"GPU override {self.field!r}: {key_top} has no entry "
                                   f"{key!r} (has: {', '.join(holder)})")
        if not self.scale:
            holder[key] = self.value
        elif isinstance(holder[key], dict):
            holder[key] = {k: _scaled(v, self.value, self.field) for k, v in holder[key].items()}
        else:
            holder[key] = _scaled(holder[key], self.value, self.field)


def _scaled(current, factor, field: str):
    if isinstance(current, bool) or not isinstance(current, (int, float)):
        if current is None:
            raise PerfsimError(f"GPU override {field!r}: a GPU in the sweep has no value to "
                               "scale (None); set the field instead, or sweep only GPUs "
                               "that have it")
        raise PerfsimError(f"GPU override {field!r}: cannot scale a {type(current).__name__}")
    if not isinstance(factor, (int, float)) or isinstance(factor, bool):
        raise PerfsimError(f"GPU override {field!r}: scale factors must be numbers, "
                           f"got {factor!r}")
    return round(current * factor) if isinstance(current, int) else current * factor


def parse_overrides(spec: dict) -> list[list[Override]]:
    """Per field, its list of :class:`Override` options (see the module docstring).

    Raises:
        perfsim.PerfsimError: an unknown field or a malformed entry (the message says which).
    """
    if not isinstance(spec, dict):
        raise PerfsimError(f"overrides must be a dict of GPU fields to values or lists of "
                           f"values (e.g. {{'sm_count': [108, 132]}}), got "
                           f"{type(spec).__name__}")
    fields = [f for f in GPUSpec.model_fields if f not in _NOT_OVERRIDABLE]
    options = []
    for name, entry in _dotted(spec).items():
        if name.split(".", 1)[0] not in fields:
            raise PerfsimError(f"unknown GPU override {name!r}; GPUSpec fields: "
                               f"{', '.join(fields)}")
        if isinstance(entry, dict):
            if set(entry) != {"scale"}:
                raise PerfsimError(f"GPU override {name!r}: give a list of values or "
                                   f"{{scale = [factors]}}, got keys {sorted(entry)}")
            values, scale = entry["scale"], True
        else:
            values, scale = entry, False
        values = values if isinstance(values, (list, tuple)) else [values]
        if not values:
            raise PerfsimError(f"GPU override {name!r}: no values")
        if scale:
            for v in values:
                if (isinstance(v, bool) or not isinstance(v, (int, float))
                        or not math.isfinite(v) or v <= 0):
                    raise PerfsimError(f"GPU override {name!r}: scale factors must be finite "
                                       f"numbers > 0, got {v!r}")
        top = name.split(".", 1)[0]
        optional = "." not in name and GPUSpec.model_fields[top].default is None
        if optional and not scale:
            # an optional field (None: not measured, its term or floor left out) may be set
            # back to None: None, or "none" from a TOML file, which has no null
            values = [None if v is None or (isinstance(v, str) and v.lower() == "none")
                      else v for v in values]
        if top in FIELD_RANGES and not scale:       # numbers only: no true, no "132"
            for v in values:
                if optional and v is None:
                    continue
                # a whole table given as one value: each of its entries (a dict for a field
                # that is not a table is checked as the number it should be, and refused)
                entries = (v.values() if isinstance(v, dict) and "." not in name
                           and _is_table(top) else [v])
                for entry in entries:
                    _check_literal(name, top, entry)
        chosen = [Override(name, v, scale) for v in values]
        # the label is what tells a what-if's rows apart; equal numbers written apart
        # (1.5e9 and 1500000000) make the same GPU, so the same rows
        twice = list(dict.fromkeys(o.label() for i, o in enumerate(chosen)
                                   if any(_same(o, p) for p in chosen[:i])))
        if twice:
            raise PerfsimError(f"GPU override {name!r}: {', '.join(twice)} given more than "
                               "once: its rows could not be told apart; give each once")
        options.append(chosen)
    return options


def _check_literal(name: str, top: str, value) -> None:
    """A value set (not scaled) on ``top`` or one of its table entries: a number (no bool, no
    string) inside :data:`perfsim.gpu.FIELD_RANGES` — what the GPU's own validation asks, so a
    value no GPU could take is one error up front, not rows marked infeasible. A scale factor
    is checked per GPU (``what_if``): the same factor can suit one GPU and not another.

    Raises:
        perfsim.PerfsimError: names the override, what it allows and what was given."""
    lo, hi, _ = FIELD_RANGES[top]
    integer = GPUSpec.model_fields[top].annotation is int
    try:
        number = strict_number(value, range_text(top), integer=integer)
    except ValueError as exc:
        raise PerfsimError(f"GPU override {name!r}: {exc}") from None
    if not lo <= number <= hi:
        kind = "an integer" if integer else "a number"
        raise PerfsimError(f"GPU override {name!r}: must be {kind} {range_text(top)}, got "
                           f"{number:g}{mhz_hint(top, number)}")


def _same(a: Override, b: Override) -> bool:
    """Two options of one field that make the same rows: the same label, or equal values
    (numbers compared by value, ``True`` not taken for 1)."""
    return a.label() == b.label() or (
        a.value == b.value and isinstance(a.value, bool) == isinstance(b.value, bool))


def _dotted(spec: dict) -> dict:
    """``spec`` with the nested tables TOML makes of unquoted dotted keys
    (``tensor_flops_per_clk_per_sm.bf16 = [...]`` reads as ``{"tensor_flops_per_clk_per_sm":
    {"bf16": [...]}}``) written back as dotted names; ``{scale = [...]}`` stays an entry."""
    out = {}
    for name, entry in spec.items():
        if (isinstance(entry, dict) and entry and set(entry) != {"scale"}
                and _is_table(name.split(".", 1)[0])):
            for key, sub in _dotted(entry).items():
                out[f"{name}.{key}"] = sub
        else:
            out[name] = entry
    return out


def _is_table(field: str) -> bool:
    """Whether ``GPUSpec.field`` holds a table of entries (a dict or a model), not a value."""
    info = GPUSpec.model_fields.get(field)
    if info is None:
        return False
    kind = info.annotation
    kinds = (typing.get_args(kind) if typing.get_origin(kind) in (typing.Union, types.UnionType)
             else (kind,))
    return any(typing.get_origin(k) is dict or k is dict
               or (isinstance(k, type) and hasattr(k, "model_fields")) for k in kinds)


def what_if(spec: GPUSpec, ovs: tuple[Override, ...]) -> tuple[GPUSpec | None, str]:
    """``spec`` with ``ovs`` applied, or ``(None, reason)`` if that GPU fails validation."""
    if not ovs:
        return spec, ""
    data = spec.model_dump()
    for o in ovs:
        o.apply(data)
    try:
        return spec.replace(**{o.top: data[o.top] for o in ovs}), ""
    except PerfsimError as exc:
        given = "; ".join(o.label() for o in ovs)
        return None, f"what-if GPU is invalid ({given}): {exc}"
