"""I/O at the edges: sources, exactly-once sinks, checkpoints, the catalog, storage and delta-rs reads."""
