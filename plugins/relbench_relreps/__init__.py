"""relbench built-in plugins: relreps (being written)."""
