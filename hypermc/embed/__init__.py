"""hypermc.embed (filled by its issue; see DESIGN.md)."""
