"""hypermc.data (filled by its issue; see DESIGN.md)."""
