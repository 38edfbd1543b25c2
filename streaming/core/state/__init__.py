"""A consumer group's state: the event contract (events), the state and its expiry (group), the
monitor's re-run of the allocation (rerun) and the versioned blob (codec)."""
