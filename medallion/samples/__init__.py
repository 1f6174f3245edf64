"""Sample data: generated events for the landing zone and for Kafka topics."""
