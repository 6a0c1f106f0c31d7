"""The memory tiers, as spillway names them. A Tier is a str, so that "DEVICE" and
Tier.DEVICE are the same wherever a tier is asked for."""

from __future__ import annotations

import enum

from .errors import UsageError


class Tier(str, enum.Enum):
    """One of the four tiers of a BufferResource, fastest first."""
    DEVICE = "DEVICE"
    PINNED_HOST = "PINNED_HOST"
    HOST = "HOST"
    DISK = "DISK"

    def __str__(self) -> str:
        return self.value


def tier_name(tier: Tier | str) -> str:
    """The tier's name as the C++ core takes it; a string that names no tier is a UsageError
    that lists the four."""
    try:
        return Tier(tier).value
    except ValueError:
        raise UsageError(f"tier {tier!r}: one of {', '.join(t.value for t in Tier)}") from None
