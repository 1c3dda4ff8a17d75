"""Process-level helpers every room may use: the fork pool, giving freed memory back."""
