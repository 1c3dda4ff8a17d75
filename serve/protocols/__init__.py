"""Thin protocol adapters over the KnowledgeSource: HTTP routes and browser security."""
