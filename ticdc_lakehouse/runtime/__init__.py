"""What a run stands on: configuration, the Spark session, locks, the state tables, fault points."""
