"""relbench built-in plugins: topology (being written)."""
