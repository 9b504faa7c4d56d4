"""pylucid.linalg (being written)."""
