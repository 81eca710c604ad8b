"""Deferrable triggers: one polling loop, its checks."""
