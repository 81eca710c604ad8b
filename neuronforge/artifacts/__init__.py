"""What the store holds and where: the layout, published artifacts, failures, leases, the farm index,
the per-host cache."""
