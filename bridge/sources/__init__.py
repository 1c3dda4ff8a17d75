"""Source clients, one module per Knowledge Source protocol."""
