"""Bronze: raw landing data, every record kept, append-only."""
