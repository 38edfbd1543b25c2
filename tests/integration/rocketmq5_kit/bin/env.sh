# Sourced by the other scripts: the RocketMQ 5 classpath (jars fetched from Maven Central by
# `python scripts/fetch_jars.py rocketmq-5`) and the JVM flags. The test harness sets RMQ5_JARS
# and RMQ5_PROGRAMS (tests/integration/rocketmq5.py); by hand, set them yourself.
KIT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
: "${RMQ5_JARS:?set RMQ5_JARS to the folder of the RocketMQ 5 jars (scripts/fetch_jars.py rocketmq-5)}"
[ -f "$RMQ5_JARS/COMPLETE" ] || { echo "rocketmq 5 kit: $RMQ5_JARS is not a complete jar set" >&2; exit 3; }
RMQ_CP="$RMQ5_JARS/*"
# Java 17 boots RocketMQ 5.3 without these; the store unmaps its files through
# sun.nio.ch.DirectBuffer and jdk.internal.ref.Cleaner (UtilAll.cleanBuffer) when it deletes or
# shrinks a commit log, which fails with an InaccessibleObjectException without the opens.
RMQ_JVM_FLAGS=(--add-exports java.base/sun.nio.ch=ALL-UNNAMED --add-opens java.base/sun.nio.ch=ALL-UNNAMED
  --add-opens java.base/java.nio=ALL-UNNAMED --add-opens java.base/java.lang=ALL-UNNAMED
  --add-opens java.base/jdk.internal.misc=ALL-UNNAMED --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
  -Dtls.server.mode=disabled -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Drocketmq.home.dir="$KIT")
: "${RUN_DIR:?set RUN_DIR to a writable directory of your own (logs, store, config go there)}"
mkdir -p "$RUN_DIR"
