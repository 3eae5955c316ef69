"""Strategy plug-ins: each file registers one strategy by name (see treedec.registry)."""
