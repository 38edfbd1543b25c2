"""The pure core: allocation, group state and findings. Imports nothing from Spark or Kafka."""
