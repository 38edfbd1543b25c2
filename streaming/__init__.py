"""rebalance-monitor: the Spark job (`streaming.spark`) and the pure core it wraps (`streaming.core`)."""
