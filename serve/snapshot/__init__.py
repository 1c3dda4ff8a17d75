"""One consistent snapshot of the folder's pages (Projection) and what it computes on first use."""
