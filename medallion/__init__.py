"""medallion: a Medallion-architecture lakehouse on Spark Structured Streaming and Delta Lake."""

__version__ = "0.1.0"
