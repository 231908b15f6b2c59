"""hypermc.optim (filled by its issue; see DESIGN.md)."""
