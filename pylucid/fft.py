"""pylucid.fft (being written)."""
