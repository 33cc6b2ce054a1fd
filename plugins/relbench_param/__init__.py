"""relbench built-in plugins: param (being written)."""
