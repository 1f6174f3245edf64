"""Engine settings: the typed model, loading ``conf/`` with each key's file, overlays per
environment. A leaf: it imports nothing else of medallion but the errors and redaction."""
