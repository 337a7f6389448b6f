"""Built-in Apple MPS plugin (placeholder)."""
