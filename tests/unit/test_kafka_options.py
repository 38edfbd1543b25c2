"""One set of Kafka options, two clients: what librdkafka and the Java client each receive."""

from __future__ import annotations

import doctest
import pickle

import pytest

from streaming.common import kafka_options
from streaming.common.kafka_options import (
    KafkaClientOptions,
    KafkaOptionError,
    for_kafka_python,
    parse_kafka_options,
)

pytestmark = pytest.mark.unit

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
CERT_PEM = "-----BEGIN CERTIFICATE-----\nMIIBcert\n-----END CERTIFICATE-----\n"
PKCS8_KEY = "-----BEGIN PRIVATE KEY-----\nMIIEkey\n-----END PRIVATE KEY-----\n"
PKCS1_KEY = "-----BEGIN RSA PRIVATE KEY-----\nMIIEkey\n-----END RSA PRIVATE KEY-----\n"


def refusal(*pairs: str) -> str:
    with pytest.raises(KafkaOptionError) as raised:
        parse_kafka_options(pairs)
    message = str(raised.value)
    assert "\n" not in message
    return message


def java_refusal(options: KafkaClientOptions) -> str:
    with pytest.raises(KafkaOptionError) as raised:
        options.for_java()
    message = str(raised.value)
    assert "\n" not in message
    return message


def test_module_docstring_example_runs():
    result = doctest.testmod(kafka_options)
    assert result.attempted > 0
    assert result.failed == 0


@pytest.mark.parametrize(("mechanism", "module"), [
    ("PLAIN", PLAIN_MODULE),
    ("SCRAM-SHA-256", SCRAM_MODULE),
    ("SCRAM-SHA-512", SCRAM_MODULE),
])
def test_username_and_password_become_the_java_login_module(mechanism, module):
    options = parse_kafka_options([
        "security.protocol=SASL_SSL", f"sasl.mechanism={mechanism}",
        "sasl.username=monitor", "sasl.password=s3cret"])

    assert options.for_java() == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.jaas.config": f'{module} required username="monitor" password="s3cret";',
    }
    assert options.for_librdkafka() == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
        "sasl.username": "monitor", "sasl.password": "s3cret",
    }


def test_quotes_and_backslashes_in_credentials_are_escaped_for_jaas():
    options = parse_kafka_options({"sasl.username": 'us"er', "sasl.password": 'a\\b"c'})

    assert options.for_java()["sasl.jaas.config"] == (
        f'{PLAIN_MODULE} required username="us\\"er" password="a\\\\b\\"c";')
    assert options.for_librdkafka()["sasl.password"] == 'a\\b"c'


def test_credentials_without_a_mechanism_mean_plain_on_both_sides():
    options = parse_kafka_options(["sasl.username=u", "sasl.password=p"])

    assert options.for_librdkafka()["sasl.mechanism"] == "PLAIN"
    assert options.for_java()["sasl.mechanism"] == "PLAIN"
    assert options.for_java()["sasl.jaas.config"].startswith(PLAIN_MODULE + " required")


def test_librdkafka_mechanisms_alias_becomes_sasl_mechanism():
    options = parse_kafka_options(["sasl.mechanisms=scram-sha-512", "sasl.username=u",
                                   "sasl.password=p"])

    assert options.for_librdkafka()["sasl.mechanism"] == "SCRAM-SHA-512"
    assert "sasl.mechanisms" not in options.for_librdkafka()
    assert options.for_java()["sasl.jaas.config"].startswith(SCRAM_MODULE)


@pytest.mark.parametrize("mechanism", ["GSSAPI", "OAUTHBEARER"])
def test_per_client_mechanisms_are_refused_with_the_prefixed_forms(mechanism):
    message = refusal(f"sasl.mechanism={mechanism}")

    assert f"java.sasl.mechanism={mechanism}" in message
    assert f"librdkafka.sasl.mechanism={mechanism}" in message


def test_unknown_mechanism_is_refused():
    assert "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512" in refusal("sasl.mechanism=DIGEST")


@pytest.mark.parametrize(("given", "missing"), [
    ("sasl.username=u", "sasl.password"),
    ("sasl.password=p", "sasl.username"),
    ("ssl.certificate.location=/c.pem", "ssl.key.location"),
    ("ssl.key.location=/k.pem", "ssl.certificate.location"),
])
def test_half_a_pair_is_refused(given, missing):
    message = refusal(given)

    assert given.partition("=")[0] in message
    assert missing in message


def test_ca_file_becomes_a_pem_truststore():
    options = parse_kafka_options(["security.protocol=ssl", "ssl.ca.location=/etc/kafka/ca.pem"])

    assert options.for_java() == {
        "security.protocol": "SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/etc/kafka/ca.pem",
    }
    assert options.for_librdkafka() == {
        "security.protocol": "SSL", "ssl.ca.location": "/etc/kafka/ca.pem"}


def test_client_certificate_files_become_a_pem_keystore(tmp_path):
    cert, key = tmp_path / "client.pem", tmp_path / "client.key"
    cert.write_text(CERT_PEM)
    key.write_text(PKCS8_KEY)
    options = parse_kafka_options([
        f"ssl.certificate.location={cert}", f"ssl.key.location={key}",
        "ssl.key.password=kp"])

    assert options.for_java() == {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": CERT_PEM,
        "ssl.keystore.key": PKCS8_KEY,
        "ssl.key.password": "kp",
    }
    assert options.for_librdkafka() == {
        "ssl.certificate.location": str(cert), "ssl.key.location": str(key),
        "ssl.key.password": "kp"}


def test_pkcs1_key_is_refused_with_the_conversion_command(tmp_path):
    cert, key = tmp_path / "client.pem", tmp_path / "client.key"
    cert.write_text(CERT_PEM)
    key.write_text(PKCS1_KEY)
    options = parse_kafka_options([f"ssl.certificate.location={cert}", f"ssl.key.location={key}"])

    message = java_refusal(options)

    assert "PKCS#8" in message
    assert f"openssl pkcs8 -topk8 -nocrypt -in {key}" in message
    assert options.for_librdkafka()["ssl.key.location"] == str(key)   # librdkafka reads PKCS#1


def test_missing_certificate_file_names_its_path(tmp_path):
    missing = tmp_path / "nowhere.pem"
    key = tmp_path / "client.key"
    key.write_text(PKCS8_KEY)
    options = parse_kafka_options([f"ssl.certificate.location={missing}",
                                   f"ssl.key.location={key}"])

    message = java_refusal(options)

    assert str(missing) in message
    assert "ssl.certificate.location" in message


def test_endpoint_identification_none_is_empty_for_java():
    options = parse_kafka_options(["ssl.endpoint.identification.algorithm=None"])

    assert options.for_java() == {"ssl.endpoint.identification.algorithm": ""}
    assert options.for_librdkafka() == {"ssl.endpoint.identification.algorithm": "none"}
    assert parse_kafka_options(["ssl.endpoint.identification.algorithm=https"]).for_java() == {
        "ssl.endpoint.identification.algorithm": "https"}


@pytest.mark.parametrize(("given", "hint"), [
    ("sasl.jaas.config=x required;", "sasl.username and sasl.password"),
    ("ssl.truststore.location=/t.jks", "ssl.ca.location"),
    ("ssl.keystore.location=/k.jks", "ssl.certificate.location and ssl.key.location"),
    ("ssl.ca.pem=-----BEGIN", "ssl.ca.location"),
])
def test_one_client_names_are_refused_with_the_shared_name(given, hint):
    key = given.partition("=")[0]
    message = refusal(given)

    assert repr(key) in message
    assert hint in message
    assert f"java.{key}=VALUE" in message


@pytest.mark.parametrize("given", ["value.deserializer=x", "key.serializer=y"])
def test_serializers_are_refused(given):
    assert given.partition("=")[0] in refusal(given)


def test_prefixed_options_reach_one_client_only():
    options = parse_kafka_options([
        "java.sasl.jaas.config=custom;", "librdkafka.ssl.ca.pem=PEMTEXT", "client.id=monitor"])

    assert options.for_java() == {"sasl.jaas.config": "custom;", "client.id": "monitor"}
    assert options.for_librdkafka() == {"ssl.ca.pem": "PEMTEXT", "client.id": "monitor"}


def test_java_prefixed_setting_overrides_the_translation():
    options = parse_kafka_options(["sasl.username=u", "sasl.password=p",
                                   "java.sasl.jaas.config=mine;"])

    assert options.for_java()["sasl.jaas.config"] == "mine;"


def test_spark_style_kafka_prefix_is_stripped():
    options = parse_kafka_options({"kafka.security.protocol": "SSL",
                                   "kafka.java.ssl.truststore.type": "JKS"})

    assert options.settings == (("security.protocol", "SSL"),)
    assert options.java_only == (("ssl.truststore.type", "JKS"),)


def test_other_names_pass_to_both_unchanged():
    options = parse_kafka_options(["linger.ms=5", "socket.keepalive.enable=true"])

    assert options.for_java() == options.for_librdkafka() == {
        "linger.ms": "5", "socket.keepalive.enable": "true"}


def test_text_without_equals_is_refused():
    assert refusal("foo") == "expected KEY=VALUE, got 'foo'"
    assert "expected KEY=VALUE" in refusal("=value")


@pytest.mark.parametrize("given", ["bootstrap.servers=b:9092", "kafka.bootstrap.servers=b:9092",
                                   "java.bootstrap.servers=b:9092",
                                   "librdkafka.bootstrap.servers=b:9092"])
def test_bootstrap_servers_is_refused(given):
    assert "--bootstrap-servers" in refusal(given)


def test_security_protocol_is_upper_cased_and_checked():
    assert parse_kafka_options(["security.protocol=sasl_plaintext"]).settings == (
        ("security.protocol", "SASL_PLAINTEXT"),)
    message = refusal("security.protocol=tls")
    assert "'tls'" in message
    assert "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL" in message


def test_redacted_hides_secrets_and_shows_the_rest():
    options = parse_kafka_options([
        "security.protocol=SASL_SSL", "sasl.username=u", "sasl.password=p",
        "ssl.key.password=kp", "java.sasl.jaas.config=secret-config;",
        "librdkafka.sasl.oauthbearer.client.secret=cs"])

    assert options.redacted() == {
        "java.sasl.jaas.config": "***",
        "librdkafka.sasl.oauthbearer.client.secret": "***",
        "sasl.mechanism": "PLAIN",
        "sasl.password": "***",
        "sasl.username": "u",
        "security.protocol": "SASL_SSL",
        "ssl.key.password": "***",
    }


def test_options_are_sorted_hashable_and_survive_pickle():
    first = parse_kafka_options(["security.protocol=SSL", "client.id=a", "java.x.y=1"])
    second = parse_kafka_options(["java.x.y=1", "client.id=a", "security.protocol=ssl"])

    assert first == second
    assert hash(first) == hash(second)
    assert first.settings == (("client.id", "a"), ("security.protocol", "SSL"))
    assert pickle.loads(pickle.dumps(first)) == first


def test_a_later_key_wins():
    options = parse_kafka_options(["client.id=a", "client.id=b"])

    assert options.for_librdkafka() == {"client.id": "b"}


def test_kafka_python_gets_its_own_keyword_names():
    options = parse_kafka_options(["security.protocol=sasl_ssl", "sasl.username=u",
                                   "sasl.password=p", "ssl.ca.location=/ca.pem",
                                   "ssl.endpoint.identification.algorithm=none"])

    assert for_kafka_python(options) == {
        "security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "u", "sasl_plain_password": "p", "ssl_cafile": "/ca.pem",
        "ssl_check_hostname": False}


def test_kafka_python_refuses_a_setting_it_has_no_name_for():
    with pytest.raises(KafkaOptionError, match="librdkafka.linger.ms=VALUE"):
        for_kafka_python(parse_kafka_options(["linger.ms=5"]))
    assert for_kafka_python(parse_kafka_options(["librdkafka.linger.ms=5"])) == {}


@pytest.mark.parametrize("command", ["simulate", "observe-kafka", "observe-rocketmq", "run"])
def test_a_command_line_refusal_ends_the_command_in_one_line(capsys, command):
    from streaming import cli

    argv = [command, "--bootstrap-servers", "b:9092", "--namesrv", "ns:9876",
            "--kafka-option", "sasl.jaas.config=x"]
    if command != "observe-rocketmq":
        argv.remove("--namesrv"), argv.remove("ns:9876")
    with pytest.raises(SystemExit) as exited:
        cli.build_parser(argv).parse_args(argv)
    error = capsys.readouterr().err
    assert exited.value.code == 2
    assert error.startswith(f"rebalance-monitor {command}: error: --kafka-option: ")
    assert error.count("\n") == 1 and "Traceback" not in error
