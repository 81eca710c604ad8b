"""Compiling: the backends (drivers of each SDK), the persistent compile caches, devices, toolchain detection."""
