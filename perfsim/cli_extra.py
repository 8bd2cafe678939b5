"""Subcommands that live beside their features: ``sweep`` (perfsim.sweep), ``validate`` and
``calibrate`` (perfsim.validate). Each module exposes ``register(subparsers)``."""

from __future__ import annotations

COMMANDS: list = []
