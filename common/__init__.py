"""Wire schemas and protocol plumbing shared by llmwiki-serve and llmwiki-agent-bridge."""
