"""What a user runs: the CLI and the commands behind it (pipeline, status, maintenance, time travel)."""
