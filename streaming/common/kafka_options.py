"""One set of Kafka client options for both kinds of Kafka client the monitor runs.

The operator gives `--kafka-option KEY=VALUE` (repeatable) once, with librdkafka's names, to
every command. The producers, the observers and the findings producer use confluent-kafka
(librdkafka); Spark's built-in Kafka source uses the Java client, which names some settings
differently and takes PEM material in other settings. The options are checked once here and each
client gets its own form of them:

>>> options = parse_kafka_options(["security.protocol=sasl_ssl",
...                                "sasl.username=app", "sasl.password=pw"])
>>> options.for_librdkafka()
{'sasl.mechanism': 'PLAIN', 'sasl.password': 'pw', 'sasl.username': 'app', 'security.protocol': 'SASL_SSL'}
>>> print(options.for_java()["sasl.jaas.config"])
org.apache.kafka.common.security.plain.PlainLoginModule required username="app" password="pw";
>>> options.redacted()["sasl.password"]
'***'

A setting for one client only is given as `java.KEY=VALUE` or `librdkafka.KEY=VALUE`. A name only
one client reads, given without such a prefix, is refused with the name to use instead, so that no
setting silently reaches one client and not the other. Any other name goes to both clients as is.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

JAVA_PREFIX = "java."
LIBRDKAFKA_PREFIX = "librdkafka."
SPARK_PREFIX = "kafka."
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
# Kerberos and OAuth settings have no common form in the two clients (keytab and JAAS vs.
# librdkafka's own sasl.kerberos.* / sasl.oauthbearer.*), so each client gets its own.
PER_CLIENT_MECHANISMS = ("GSSAPI", "OAUTHBEARER")
ENDPOINT_ALGORITHMS = {"none": "", "https": "https"}
ALIASES = {"sasl.mechanisms": "sasl.mechanism"}
# Names only one client reads (or reads differently): what to give instead, read by both.
ONE_CLIENT_NAMES = {
    "sasl.jaas.config": "sasl.username and sasl.password (with sasl.mechanism)",
    "ssl.truststore.location": "ssl.ca.location (a PEM file)",
    "ssl.truststore.type": "ssl.ca.location (a PEM file)",
    "ssl.truststore.password": "ssl.ca.location (a PEM file)",
    "ssl.keystore.location": "ssl.certificate.location and ssl.key.location (PEM files)",
    "ssl.keystore.type": "ssl.certificate.location and ssl.key.location (PEM files)",
    "ssl.keystore.password": "ssl.certificate.location and ssl.key.location (PEM files)",
    "ssl.ca.pem": "ssl.ca.location (a PEM file)",
    "ssl.certificate.pem": "ssl.certificate.location (a PEM file)",
    "ssl.key.pem": "ssl.key.location (a PEM file)",
}
# Settings both clients need, each only with the other: refused alone.
PAIRED = (("sasl.username", "sasl.password"), ("ssl.certificate.location", "ssl.key.location"))
# librdkafka names the Java side gets in translated form only.
TRANSLATED = frozenset({"sasl.username", "sasl.password", "ssl.ca.location",
                        "ssl.certificate.location", "ssl.key.location"})
SECRET_WORDS = ("password", "secret", "jaas", "token", "credentials")
SECRET_ENDINGS = (".key", ".pem")
PKCS1_KEY = re.compile(r"-----BEGIN (RSA|EC|DSA) PRIVATE KEY-----")
BOOTSTRAP_SERVERS = "bootstrap.servers"


class KafkaOptionError(ValueError):
    """A Kafka option that cannot be given as it is; the message (one line) says what to do."""


@dataclass(frozen=True)
class KafkaClientOptions:
    """The checked options: `settings` for both clients (librdkafka names), the rest for one."""

    settings: tuple[tuple[str, str], ...] = ()
    java_only: tuple[tuple[str, str], ...] = ()
    librdkafka_only: tuple[tuple[str, str], ...] = ()

    def for_librdkafka(self) -> dict[str, str]:
        """confluent-kafka's configuration, without bootstrap.servers."""
        return dict(sorted({**dict(self.settings), **dict(self.librdkafka_only)}.items()))

    def for_java(self) -> dict[str, str]:
        """The Java client's configuration (Spark wants each as `kafka.<name>`).

        Reads the client certificate and key files, so a bad one raises KafkaOptionError here.
        """
        settings = dict(self.settings)
        java = {key: value for key, value in settings.items() if key not in TRANSLATED}
        for translate in (_java_login, _java_truststore, _java_keystore, _java_endpoint):
            java.update(translate(settings))
        return dict(sorted({**java, **dict(self.java_only)}.items()))

    def redacted(self) -> dict[str, str]:
        """Every option as given (one-client ones with their prefix), secrets as "***"."""
        given = [*self.settings,
                 *((JAVA_PREFIX + key, value) for key, value in self.java_only),
                 *((LIBRDKAFKA_PREFIX + key, value) for key, value in self.librdkafka_only)]
        return {key: "***" if _is_secret(key) else value for key, value in sorted(given)}


def parse_kafka_options(pairs: Iterable[str] | Mapping[str, str]) -> KafkaClientOptions:
    """Check KEY=VALUE strings (or a mapping) once; a later KEY wins, as with repeated flags."""
    sides: dict[str, dict[str, str]] = {JAVA_PREFIX: {}, LIBRDKAFKA_PREFIX: {}, "": {}}
    for given_key, value in _key_values(pairs):
        key = given_key.removeprefix(SPARK_PREFIX)
        prefix = next((p for p in (JAVA_PREFIX, LIBRDKAFKA_PREFIX) if key.startswith(p)), "")
        if prefix:
            sides[prefix][_one_client_name(prefix, key)] = value
        else:
            name, setting = _shared_setting(key, value)
            sides[""][name] = setting
    shared = _with_default_mechanism(_checked_pairs(sides[""]))
    options = KafkaClientOptions(settings=tuple(sorted(shared.items())),
                                 java_only=tuple(sorted(sides[JAVA_PREFIX].items())),
                                 librdkafka_only=tuple(sorted(sides[LIBRDKAFKA_PREFIX].items())))
    for name, value in options.for_librdkafka().items():
        _check_with_librdkafka(name, value)
    return options


def _check_with_librdkafka(name: str, value: str) -> None:
    """librdkafka's own word on one setting, taken alone: an unknown name or a value it cannot
    parse is refused now, not when the first client starts. What only a whole configuration can
    be judged on ("Failed to create ...": a mechanism this build lacks, a missing partner
    setting) is left to the clients, which get the whole of it."""
    from confluent_kafka import KafkaException, Producer

    try:
        Producer({name: value, "log_level": 0})
    except KafkaException as error:
        said = error.args[0].str()
        if not said.startswith("Failed to create"):
            shown = "its value is refused" if _is_secret(name) else said
            raise KafkaOptionError(f"kafka option {name!r}: librdkafka says: {shown}") from None


def _key_values(pairs: Iterable[str] | Mapping[str, str]) -> list[tuple[str, str]]:
    if isinstance(pairs, str):
        raise TypeError("give a list of KEY=VALUE strings, not one string")
    if isinstance(pairs, Mapping):
        return [(str(key).strip(), str(value)) for key, value in pairs.items()]
    return [_key_value(text) for text in pairs]


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise KafkaOptionError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def _one_client_name(prefix: str, key: str) -> str:
    name = key.removeprefix(prefix)
    if not name:
        raise KafkaOptionError(f"kafka option {key!r}: expected {prefix}KEY=VALUE")
    if name == BOOTSTRAP_SERVERS:
        raise _bootstrap_servers_error(key)
    return name


def _shared_setting(key: str, value: str) -> tuple[str, str]:
    name = ALIASES.get(key, key)
    if name == BOOTSTRAP_SERVERS:
        raise _bootstrap_servers_error(key)
    if name in ONE_CLIENT_NAMES:
        raise KafkaOptionError(
            f"kafka option {key!r} is not read the same way by the Java client and librdkafka: "
            f"give {ONE_CLIENT_NAMES[name]} instead, or give it to the one client that reads it "
            f"as java.{key}=VALUE or librdkafka.{key}=VALUE")
    if name.endswith((".serializer", ".deserializer")):
        raise KafkaOptionError(
            f"kafka option {key!r}: the monitor sets its own (de)serializers; remove it")
    normalize = VALUE_NORMALIZERS.get(name)
    return name, normalize(value) if normalize else value


def _bootstrap_servers_error(key: str) -> KafkaOptionError:
    return KafkaOptionError(
        f"kafka option {key!r}: give the brokers with --bootstrap-servers instead, "
        "which every client uses")


def _one_of(name: str, value: str, normalized: str, choices: Iterable[str]) -> str:
    if normalized not in choices:
        raise KafkaOptionError(
            f"kafka option {name}: expected one of {', '.join(choices)}, got {value!r}")
    return normalized


def _security_protocol(value: str) -> str:
    return _one_of("security.protocol", value, value.strip().upper(), SECURITY_PROTOCOLS)


def _sasl_mechanism(value: str) -> str:
    mechanism = value.strip().upper()
    if mechanism in PER_CLIENT_MECHANISMS:
        raise KafkaOptionError(
            f"kafka option sasl.mechanism={mechanism} has different settings in each client: "
            f"give java.sasl.mechanism={mechanism} with java.sasl.jaas.config for the Java client "
            f"and librdkafka.sasl.mechanism={mechanism} with librdkafka.sasl.* settings for "
            "librdkafka")
    return _one_of("sasl.mechanism", value, mechanism, LOGIN_MODULES)


def _endpoint_algorithm(value: str) -> str:
    return _one_of("ssl.endpoint.identification.algorithm", value, value.strip().lower(),
                   ENDPOINT_ALGORITHMS)


VALUE_NORMALIZERS = {
    "security.protocol": _security_protocol,
    "sasl.mechanism": _sasl_mechanism,
    "ssl.endpoint.identification.algorithm": _endpoint_algorithm,
}


def _checked_pairs(settings: dict[str, str]) -> dict[str, str]:
    for first, second in PAIRED:
        if (first in settings) != (second in settings):
            given, missing = (first, second) if first in settings else (second, first)
            raise KafkaOptionError(f"kafka option {given} needs {missing} as well")
    return settings


def _with_default_mechanism(settings: dict[str, str]) -> dict[str, str]:
    # Both clients default to GSSAPI; a user name and password mean PLAIN, said to both.
    if "sasl.username" in settings and "sasl.mechanism" not in settings:
        return {**settings, "sasl.mechanism": "PLAIN"}
    return settings


def _java_login(settings: Mapping[str, str]) -> dict[str, str]:
    if "sasl.username" not in settings:
        return {}
    module = LOGIN_MODULES[settings.get("sasl.mechanism", "PLAIN")]
    username, password = (_jaas_quoted(settings[key]) for key in ("sasl.username", "sasl.password"))
    return {"sasl.jaas.config": f'{module} required username="{username}" password="{password}";'}


def _jaas_quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _java_truststore(settings: Mapping[str, str]) -> dict[str, str]:
    location = settings.get("ssl.ca.location")
    # "probe" is librdkafka's "the system's CA certificates": the JVM's default trust store.
    if location is None or location == "probe":
        return {}
    return {"ssl.truststore.type": "PEM", "ssl.truststore.location": location}


def _java_keystore(settings: Mapping[str, str]) -> dict[str, str]:
    if "ssl.certificate.location" not in settings:
        return {}
    return {"ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain":
                _pem_text("ssl.certificate.location", settings["ssl.certificate.location"]),
            "ssl.keystore.key": _pkcs8_key(settings["ssl.key.location"])}


def _java_endpoint(settings: Mapping[str, str]) -> dict[str, str]:
    algorithm = settings.get("ssl.endpoint.identification.algorithm")
    if algorithm is None:
        return {}
    return {"ssl.endpoint.identification.algorithm": ENDPOINT_ALGORITHMS[algorithm]}


def _pem_text(name: str, path: str) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = (error.strerror if isinstance(error, OSError) else None) or "not a text file"
        raise KafkaOptionError(f"kafka option {name}: cannot read {path!r} ({reason}); "
                               "the Java client needs it as a readable PEM file") from None
    if "-----BEGIN " not in text:
        raise KafkaOptionError(f"kafka option {name}: {path!r} is not a PEM file "
                               "(no -----BEGIN line); the Java client needs PEM")
    return text


def _pkcs8_key(path: str) -> str:
    text = _pem_text("ssl.key.location", path)
    if found := PKCS1_KEY.search(text):
        raise KafkaOptionError(
            f"kafka option ssl.key.location: {path!r} holds a '{found.group(0)}' key, which the "
            "Java client cannot read; it needs PKCS#8 ('BEGIN PRIVATE KEY' or 'BEGIN ENCRYPTED "
            f"PRIVATE KEY'): convert it with openssl pkcs8 -topk8 -nocrypt -in {shlex.quote(path)} "
            f"-out {shlex.quote(path + '.pk8')} (without -nocrypt the key is encrypted; give its "
            "passphrase as ssl.key.password) and give that file")
    return text


def _is_secret(key: str) -> bool:
    return any(word in key for word in SECRET_WORDS) or key.endswith(SECRET_ENDINGS)


# kafka-python (observe-kafka's admin client) takes keyword arguments of its own names.
KAFKA_PYTHON_NAMES = {
    "security.protocol": "security_protocol", "sasl.mechanism": "sasl_mechanism",
    "sasl.username": "sasl_plain_username", "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile", "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile", "ssl.key.password": "ssl_password",
    "client.id": "client_id",
}


def for_kafka_python(options: KafkaClientOptions) -> dict[str, object]:
    """kafka-python's keyword arguments for the shared settings; a setting it has no name for
    is refused (give it as librdkafka.KEY=VALUE when only the librdkafka clients need it)."""
    arguments: dict[str, object] = {}
    for key, value in options.settings:
        if key == "ssl.endpoint.identification.algorithm":
            arguments["ssl_check_hostname"] = value == "https"
        elif key in KAFKA_PYTHON_NAMES:
            arguments[KAFKA_PYTHON_NAMES[key]] = value
        else:
            raise KafkaOptionError(
                f"kafka option {key!r} has no equivalent in observe-kafka's admin client "
                f"(kafka-python): give it as librdkafka.{key}=VALUE if only the librdkafka "
                "clients need it")
    return arguments
