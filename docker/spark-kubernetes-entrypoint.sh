#!/bin/bash
# Entry point of the job's image for Spark on Kubernetes. Spark starts the driver and executor
# pods of a SparkApplication (or of spark-submit --master k8s://) with `driver ...` and
# `executor ...`, which Spark's own images answer in their /opt/entrypoint.sh; this answers them
# the same way for pip's pyspark. Anything else is a rebalance-monitor command (`run ...`).
set -euo pipefail

if [ -z "${SPARK_HOME:-}" ]; then
  SPARK_HOME="$(python3 -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"
fi
export SPARK_HOME

case "${1:-}" in
  driver)
    shift
    exec "$SPARK_HOME/bin/spark-submit" \
      --conf "spark.driver.bindAddress=$SPARK_DRIVER_BIND_ADDRESS" \
      --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=$SPARK_DRIVER_BIND_ADDRESS" \
      --deploy-mode client "$@"
    ;;
  executor)
    shift
    java_options=()
    for name in "${!SPARK_JAVA_OPT_@}"; do
      java_options+=("${!name}")
    done
    exec "${JAVA_HOME:+$JAVA_HOME/bin/}java" "${java_options[@]}" \
      -Xms"$SPARK_EXECUTOR_MEMORY" -Xmx"$SPARK_EXECUTOR_MEMORY" \
      -cp "${SPARK_CONF_DIR:-$SPARK_HOME/conf}:$SPARK_HOME/jars/*:$PWD" \
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "$SPARK_DRIVER_URL" --executor-id "$SPARK_EXECUTOR_ID" \
      --cores "$SPARK_EXECUTOR_CORES" --app-id "$SPARK_APPLICATION_ID" \
      --hostname "$SPARK_EXECUTOR_POD_IP" --resourceProfileId "$SPARK_RESOURCE_PROFILE_ID" \
      --podName "$SPARK_EXECUTOR_POD_NAME"
    ;;
  *)
    exec rebalance-monitor "$@"
    ;;
esac
