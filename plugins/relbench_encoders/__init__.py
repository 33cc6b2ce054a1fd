"""relbench built-in plugins: encoders (being written)."""
