# rebalance-monitor image: the streaming job (`rebalance-monitor run`) and the simulator.
#
# Build from the repository root (docker compose does this):
#   docker build -f docker/job.Dockerfile -t rebalance-monitor:local .
#
# Spark's Kafka connector is not part of pyspark's wheel. It is resolved once, at build time, by
# spark-submit --packages (Ivy, from Maven Central) for exactly the pinned Spark version, and put
# on every session's classpath through spark-defaults.conf, so `--source kafka` works offline at
# run time. SPARK_VERSION must equal the pyspark that constraints.txt pins, which is a version
# whose connector exists on Maven Central (tests/unit/test_compose.py checks both).
FROM python:3.11-slim-bookworm

ARG SPARK_VERSION=4.2.0
ARG SCALA_BINARY_VERSION=2.13

# Java runs Spark; procps gives `ps`, which Spark's launch scripts call.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/*

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    SPARK_CONF_DIR=/opt/spark/conf

RUN pip install "pyspark==${SPARK_VERSION}"

# Resolve org.apache.spark:spark-sql-kafka-0-10_<scala>:<spark> and its dependencies into
# /opt/spark/ivy/jars, then list them in spark.jars (what --packages would do at every start).
RUN set -eux; \
    mkdir -p /opt/spark/conf /opt/spark/ivy; \
    echo 'pass' > /tmp/resolve_packages.py; \
    spark-submit --master 'local[1]' \
      --conf spark.jars.ivy=/opt/spark/ivy \
      --packages "org.apache.spark:spark-sql-kafka-0-10_${SCALA_BINARY_VERSION}:${SPARK_VERSION}" \
      /tmp/resolve_packages.py; \
    test -f "/opt/spark/ivy/jars/org.apache.spark_spark-sql-kafka-0-10_${SCALA_BINARY_VERSION}-${SPARK_VERSION}.jar"; \
    echo "spark.jars $(ls /opt/spark/ivy/jars/*.jar | paste -sd, -)" > /opt/spark/conf/spark-defaults.conf; \
    cat /opt/spark/conf/spark-defaults.conf; \
    rm /tmp/resolve_packages.py; \
    chmod -R a+rX /opt/spark

WORKDIR /opt/rebalance-monitor
COPY pyproject.toml README.md constraints.txt ./
COPY streaming ./streaming
COPY producers ./producers
RUN pip install -c constraints.txt "pyspark==${SPARK_VERSION}" ".[job]" \
 && python -c "import pyspark, sys; sys.exit(pyspark.__version__ != '${SPARK_VERSION}')"

RUN useradd --create-home --uid 10001 monitor \
 && mkdir -p /data \
 && chown monitor /data
USER monitor
VOLUME /data

# 9108: /metrics; 4040: the Spark UI.
EXPOSE 9108 4040
ENTRYPOINT ["rebalance-monitor"]
CMD ["run", "--bootstrap-servers", "kafka:9092", "--topic", "rebalance.events", \
     "--checkpoint", "/data/checkpoint", "--metrics-host", "0.0.0.0", "--source", "kafka"]
