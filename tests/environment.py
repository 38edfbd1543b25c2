"""What the environment chooses for the integration tests."""

import os

# The job's source: Spark's own ("kafka", the default) or the project's reader ("embedded").
TEST_SOURCE = os.environ.get("REBALANCE_MONITOR_TEST_SOURCE", "kafka")
