"""hypermc.manifolds (filled by its issue; see DESIGN.md)."""
