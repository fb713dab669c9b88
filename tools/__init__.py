"""Maintenance commands for this repository (not part of the package)."""
