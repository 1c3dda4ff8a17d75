"""The toolchain's package version, reported by both services."""

__version__ = "0.1.0"
