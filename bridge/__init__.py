"""llmwiki-agent-bridge: fans a question out to Knowledge Sources and returns one cited result."""
