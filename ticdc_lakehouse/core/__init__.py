"""The model every stage shares: events, table schemas, MySQL types and values, SQL spelling, redaction."""
