"""The folder as it is now: which files changed (inotify, stat walks), each read and parsed into a record."""
