"""Pipelines declared, not hard-wired: the declaration model, its loading, checks and graph.

Nothing in this package imports pyspark: a definition is loaded and checked, and its graph printed
(``medallion pipelines``), before any JVM starts. Running the layers is :mod:`medallion.engine.runner`.
"""
