"""relbench built-in plugins: irp (being written)."""
