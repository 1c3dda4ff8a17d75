"""Retrieval over a projection: analyzer, lexical index, search, context packs, guidance."""
