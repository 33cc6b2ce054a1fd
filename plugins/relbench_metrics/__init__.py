"""relbench built-in plugins: metrics (being written)."""
