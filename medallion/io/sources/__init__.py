"""Readers: the landing zone's files and the lakehouse's Delta tables, as streams."""
