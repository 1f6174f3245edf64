"""Operating a lakehouse: status, backfill, maintenance, reports, landing, submit commands, buckets."""
