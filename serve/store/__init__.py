"""The store: what serve derives from a folder, kept in SQLite under the cache directory."""
