# The job's image for Spark on Kubernetes: the Spark operator's SparkApplication
# (deploy/kubernetes/) or spark-submit --master k8s://. It is the job's image (job.Dockerfile)
# with the entry point Spark's pods need; build both from the repository root:
#   docker build -f docker/job.Dockerfile -t rebalance-monitor:local .
#   docker build -f docker/spark-kubernetes.Dockerfile -t rebalance-monitor-spark:local .
ARG JOB_IMAGE=rebalance-monitor:local
FROM ${JOB_IMAGE}

USER root

# Spark mounts its own /opt/spark/conf in the driver pod (the submission's properties), which
# hides the job image's spark-defaults.conf and its spark.jars: put the Kafka connector's jars on
# every Spark JVM's classpath instead (the four that pyspark lacks, as scripts/fetch_jars.py).
RUN set -eux; \
    spark_home="$(python3 -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"; \
    for artifact in spark-sql-kafka-0-10_2.13 spark-token-provider-kafka-0-10_2.13 \
                    kafka-clients commons-pool2; do \
      cp /opt/spark/ivy/jars/*_"${artifact}"-[0-9]*.jar "${spark_home}/jars/"; \
    done

COPY docker/spark-kubernetes-entrypoint.sh /opt/rebalance-monitor/spark-kubernetes-entrypoint.sh

USER monitor
ENTRYPOINT ["/opt/rebalance-monitor/spark-kubernetes-entrypoint.sh"]
CMD ["--help"]
