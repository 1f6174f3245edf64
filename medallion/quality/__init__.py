"""Data-quality gates between layers: expectations from configuration, checked per micro-batch.

``spec`` reads the expectations, ``evaluate`` computes them with Great Expectations in one pass
over a batch, ``gate`` applies their severities inside a writer, ``results`` records and shows
what was checked.
"""
