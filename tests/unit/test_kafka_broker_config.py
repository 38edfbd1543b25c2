"""The Apache Kafka test broker's configuration (streaming/kafka_broker.py), without a JVM."""

from pathlib import Path

import pytest

from streaming.kafka_broker import server_properties

pytestmark = pytest.mark.unit

PORTS = {"PLAINTEXT": 9092, "SASL_PLAINTEXT": 9093, "CONTROLLER": 9094}


def test_one_node_is_broker_and_controller_on_loopback():
    settings = server_properties(PORTS, Path("/data"), {"u": "p"})
    assert settings["process.roles"] == "broker,controller"
    assert settings["controller.quorum.bootstrap.servers"] == "127.0.0.1:9094"
    assert settings["advertised.listeners"] == (
        "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093")
    assert settings["offsets.topic.replication.factor"] == "1"
    assert settings["log.dirs"] == "/data"


def test_the_sasl_listener_knows_each_user_for_plain_and_enables_scram():
    settings = server_properties(PORTS, Path("/data"), {"alice": "a-secret", "bob": "b"})
    assert settings["listener.name.sasl_plaintext.plain.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'user_alice="a-secret" user_bob="b";')
    assert settings["sasl.enabled.mechanisms"] == "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
    assert "ScramLoginModule" in settings[
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config"]


def test_an_ssl_listener_serves_the_pem_keystore_it_is_given():
    settings = server_properties({**PORTS, "SSL": 9095}, Path("/data"), {"u": "p"},
                                 keystore=Path("/tls/server-keystore.pem"))
    assert settings["listeners"].split(",") == [
        "PLAINTEXT://127.0.0.1:9092", "SASL_PLAINTEXT://127.0.0.1:9093", "SSL://127.0.0.1:9095",
        "CONTROLLER://127.0.0.1:9094"]
    assert "SSL:SSL" in settings["listener.security.protocol.map"].split(",")
    assert settings["listener.name.ssl.ssl.keystore.type"] == "PEM"
    assert settings["listener.name.ssl.ssl.keystore.location"] == "/tls/server-keystore.pem"
