"""Gold: windowed aggregates of silver events that analysts query."""
