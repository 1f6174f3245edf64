"""Writers: streaming Delta appends and idempotent per-batch writes (append, MERGE)."""
