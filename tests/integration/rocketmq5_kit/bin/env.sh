# Sourced by the other scripts: the RocketMQ 5 classpath (jars fetched from Maven Central by
# `python scripts/fetch_jars.py rocketmq-5`) and the JVM flags. The test harness sets RMQ5_JARS
# and RMQ5_PROGRAMS (RocketMQKit.from_maven in tests/integration/rocketmq_cluster.py); by hand, set them yourself.
KIT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
: "${RMQ5_JARS:?set RMQ5_JARS to the folder of the RocketMQ 5 jars (scripts/fetch_jars.py rocketmq-5)}"
[ -f "$RMQ5_JARS/COMPLETE" ] || { echo "rocketmq 5 kit: $RMQ5_JARS is not a complete jar set" >&2; exit 3; }
RMQ_CP="$RMQ5_JARS/*"
# Java 17 needs no --add-opens here: test_rocketmq_cluster.py passed on 5.3.3 without any. The store
# casts to sun.nio.ch.DirectBuffer where it locks or pools pages (DefaultMappedFile,
# TransientStorePool; off by default), which would fail without the one export kept below.
RMQ_JVM_FLAGS=(--add-exports java.base/sun.nio.ch=ALL-UNNAMED
  -Dtls.server.mode=disabled -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Drocketmq.home.dir="$KIT")
: "${RUN_DIR:?set RUN_DIR to a writable directory of your own (logs, store, config go there)}"
mkdir -p "$RUN_DIR"
