"""hypermc.nn (filled by its issue; see DESIGN.md)."""
