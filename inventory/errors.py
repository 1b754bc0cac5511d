"""The one error an inventory loader raises: it names the file, the host and the field."""

from __future__ import annotations

from preflight.config.errors import InputError


class InventoryError(InputError):
    """A malformed inventory; str() is the one line the CLI prints."""
