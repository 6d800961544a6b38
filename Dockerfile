# Headwater: broker, Connect workers and CLI in one image (with Java, for the Spark lake sink; the same image
# runs a Spark standalone master and worker from the scripts the pyspark package ships).
FROM python:3.11-slim-bookworm

RUN apt-get update \
    && apt-get install -y --no-install-recommends kcat openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/headwater
COPY pyproject.toml setup.py README.md ./
COPY headwater ./headwater
COPY broker ./broker
COPY connect ./connect
COPY connectors ./connectors
COPY plugins ./plugins
COPY configs ./configs
RUN pip install --no-cache-dir . && pip install --no-cache-dir ./plugins/headwater-datagen

# Everything runs as an unprivileged user that owns only its data folders: the code and plugin.path
# (/opt/headwater/plugins) stay root's, so nothing running here can drop a plugin in.
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /home/headwater headwater \
    && mkdir -p /var/lib/headwater/broker /var/lib/headwater/lake /var/lib/headwater/spark-work \
    && chown -R headwater:headwater /var/lib/headwater
USER headwater

ENV SPARK_HOME=/usr/local/lib/python3.11/site-packages/pyspark
ENV SPARK_WORKER_DIR=/var/lib/headwater/spark-work
EXPOSE 9092 8083
ENTRYPOINT ["headwater"]
CMD ["up", "--kafka-listener", "0.0.0.0:9092", "--rest-listener", "0.0.0.0:8083", "--data-dir", "/var/lib/headwater/up"]
