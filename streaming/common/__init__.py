"""What the job and the producer commands both use, and nothing else of the project's: options
and their checks, logging, Kafka client settings, delivery with retries, error causes,
log-once-per-change and backoff. It imports only itself; streaming.core (the pure core) does
not import it either (tests/unit/test_import_layers.py)."""
