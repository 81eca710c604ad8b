# Airflow 3.3 (api-server, scheduler, dag-processor, triggerer, default Celery worker) + neuronforge.
# Production image: the runtime requirements and the Celery/PostgreSQL extras only, no test tools
# (requirements.txt adds pytest, moto, ruff, hadolint... for development; this image never reads it).
ARG AIRFLOW_VERSION=3.3.2
FROM apache/airflow:${AIRFLOW_VERSION}-python3.11

USER 0
# g++ is what AOTInductor (cpu backend) compiles with; Debian's security updates replace exact
# package versions, so pinning one would break rebuilds.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends g++ \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /var/lib/neuronforge /opt/airflow/store \
    && chown 50000:0 /var/lib/neuronforge /opt/airflow/store \
    && chmod g+rwx /var/lib/neuronforge /opt/airflow/store
# the image's `airflow` user
USER 50000

WORKDIR /opt/neuronforge
COPY --chown=airflow:root requirements-runtime.txt requirements-deploy.txt constraints.txt pyproject.toml README.md ./
# The CPU torch wheel: an unpinned torch would pull a multi-GB CUDA build.
RUN pip install --no-cache-dir --extra-index-url https://download.pytorch.org/whl/cpu \
        -r requirements-runtime.txt -r requirements-deploy.txt -c constraints.txt
COPY --chown=airflow:root neuronforge ./neuronforge
COPY --chown=airflow:root neuronforge_airflow ./neuronforge_airflow
# The recompile DAG's default model catalog (override: Airflow Variable neuronforge_catalog).
COPY --chown=airflow:root catalog ./catalog
COPY --chown=airflow:root dags /opt/airflow/dags
# the artifact catalog page: the api-server loads it from the image's default plugins folder
COPY --chown=airflow:root plugins /opt/airflow/plugins
# The cluster policy: baked into the image's config dir, and kept at its source path for compose's
# `init` service, which installs it into the config volume every component shares.
COPY --chown=airflow:root docker/airflow_local_settings.py ./docker/airflow_local_settings.py
COPY --chown=airflow:root docker/airflow_local_settings.py /opt/airflow/config/airflow_local_settings.py
RUN pip install --no-cache-dir --no-deps -e .

ENV AIRFLOW__CORE__LOAD_EXAMPLES=False \
    NEURONFORGE_HOME=/var/lib/neuronforge
