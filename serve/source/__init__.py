"""Reading a knowledge folder: file rules, shape detection, page parsing, graph sidecars."""
