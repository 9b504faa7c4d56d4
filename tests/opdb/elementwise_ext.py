"""Op-database entries (being written)."""

ENTRIES: list = []
