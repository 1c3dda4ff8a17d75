"""The run: request -> selection -> discovery -> fan-out -> evidence -> runtime -> artifact (no web)."""
