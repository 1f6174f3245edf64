"""Gold: windowed aggregates that analysts query, compiled from the pipelines' declarations."""
