"""Cluster policy and run-start checks: pool slots for Neuron hosts, the pool and policy present."""
