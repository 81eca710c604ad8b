"""The store as a farm: catalog, listings, recompiles on SDK upgrades, garbage collection, verification, sweeps."""
