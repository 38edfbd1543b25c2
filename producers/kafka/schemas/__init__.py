"""Apache Kafka 4.3.1's JSON message schemas for ConsumerGroupDescribe (API key 69) and
ShareGroupDescribe (77), verbatim from apache/kafka's clients/src/main/resources/common/message/
as released in kafka-clients-4.3.1-sources.jar; producers/kafka/protocol.py generates its
kafka-python request/response classes from them."""
