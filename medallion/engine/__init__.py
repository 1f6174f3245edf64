"""The engine: a run's flows planned and started, one kind of flow per layer, and what they did."""
