"""The bridge's inbound protocol surfaces."""
