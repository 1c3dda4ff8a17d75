"""llmwiki-agent-bridge: fans a question out to Knowledge Sources (arrives in a later issue)."""
