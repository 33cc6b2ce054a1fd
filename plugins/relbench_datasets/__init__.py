"""relbench built-in plugins: datasets (being written)."""
