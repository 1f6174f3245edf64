"""The one Spark session factory, the JVM it starts and the packages it resolves."""
