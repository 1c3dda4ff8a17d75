"""The link graph: its model, who links to whom, the views answers read, and a context pack's graph."""
