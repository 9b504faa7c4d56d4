"""pylucid.special (being written)."""
