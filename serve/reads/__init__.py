"""Page reads: which page a read names, and plain or focused read payloads."""
