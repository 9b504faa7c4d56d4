"""pylucid.optim (being written)."""
