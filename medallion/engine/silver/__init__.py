"""Silver: bronze events parsed, validated, deduplicated and enriched; the rest quarantined."""
