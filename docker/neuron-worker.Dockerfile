# A Celery worker for queue `neuron-<NEURON_SDK_VERSION>`: the AWS Neuron deep-learning container (Neuron SDK, runtime,
# neuronx-cc, NxD Inference, optimum-neuron) + Airflow + neuronforge. Run it on inf2 / trn1 / trn2
# hosts with the /dev/neuron* devices mapped in (compose.yaml) or on EKS with
# `aws.amazon.com/neuron` resource requests. Production image: no test tools.
ARG NEURON_DLC=public.ecr.aws/neuron/pytorch-inference-neuronx
ARG NEURON_SDK_VERSION=2.26.1
ARG DLC_TAG=2.8.0-neuronx-py311-sdk${NEURON_SDK_VERSION}-ubuntu22.04
FROM ${NEURON_DLC}:${DLC_TAG}
# One image per Neuron SDK release: its pins (docker/neuron-sdk/<release>.txt) and its queue.
ARG NEURON_SDK_VERSION

ARG AIRFLOW_VERSION=3.3.2
WORKDIR /opt/neuronforge
COPY docker/neuron-sdk/${NEURON_SDK_VERSION}.txt ./requirements-neuron.txt
COPY requirements-deploy.txt constraints.txt pyproject.toml README.md ./
# The DLC already holds the SDK pinned by docker/neuron-sdk/<release>.txt; this re-asserts the pins from
# AWS's repository (never PyPI's placeholders of the same names). Then Airflow, its AWS provider and
# the Celery/PostgreSQL extras at the versions the rest of the deployment runs (constraints.txt);
# the DLC's own torch / transformers / optimum-neuron stay as AWS built them.
RUN pip install --no-cache-dir --extra-index-url https://pip.repos.neuron.amazonaws.com \
        -r requirements-neuron.txt \
    && pip install --no-cache-dir "apache-airflow==${AIRFLOW_VERSION}" \
        apache-airflow-providers-amazon==9.39.0 \
        -r requirements-deploy.txt -c constraints.txt
COPY neuronforge ./neuronforge
COPY operators ./operators
COPY catalog ./catalog
COPY dags /opt/airflow/dags
COPY docker/airflow_local_settings.py ./docker/airflow_local_settings.py
COPY docker/airflow_local_settings.py /opt/airflow/config/airflow_local_settings.py
RUN pip install --no-cache-dir --no-deps -e .

ENV NEURON_SDK_VERSION=${NEURON_SDK_VERSION} \
    AIRFLOW_HOME=/opt/airflow \
    AIRFLOW__CORE__LOAD_EXAMPLES=False \
    NEURONFORGE_HOME=/var/lib/neuronforge \
    NEURON_RT_LOG_LEVEL=WARNING
# The queue of the profiles pinned to this SDK release (neuronforge.profiles: `neuron-<release>`).
CMD ["sh", "-c", "exec airflow celery worker -q \"neuron-${NEURON_SDK_VERSION}\" --concurrency 1"]
