"""The CLI's verbs for dead letters, schedules and chains, one module each, and what they share."""
