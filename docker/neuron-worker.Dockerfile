# A Celery worker of one Neuron SDK release, in one of two roles (one image, NEURONFORGE_WORKER_ROLE):
#   compile (default)  queue neuron-compile-<release>: toolchain detection and compiles, on CPU instances
#                      (no Neuron device, many times cheaper per hour)
#   neuron             queue neuron-<release>: the stages that need NeuronCores (the smoke test; the compile
#                      too where the toolchain cannot compile without a device), on inf2 / trn1 / trn2 hosts
#                      with /dev/neuron* mapped in (compose.yaml) or `aws.amazon.com/neuron` requests on EKS
# The queues come from the profile registry: `neuronforge worker-queues --sdk <release> --role <role>`.
#
# The base is the SDK's own image — the AWS Neuron deep-learning container, or for SDK 2.21.1 the LMI
# image itself — whose Python holds the SDK: the toolchain runs there, under TOOLCHAIN_PYTHON
# (NEURONFORGE_TOOLCHAIN_PYTHON; docker/neuron-sdk/images.json records each base image's interpreter).
# Airflow and neuronforge run in their own CPython 3.11 venv installed by uv (a standalone build that
# needs only glibc), so the worker builds on an image of any Python: the LMI image's is 3.10.
# Production image: no test tools.
ARG NEURON_DLC=public.ecr.aws/neuron/pytorch-inference-neuronx
ARG NEURON_SDK_VERSION=2.26.1
ARG DLC_TAG=2.8.0-neuronx-py311-sdk${NEURON_SDK_VERSION}-ubuntu22.04
ARG UV_IMAGE=ghcr.io/astral-sh/uv:0.9.7
FROM ${UV_IMAGE} AS uv

FROM ${NEURON_DLC}:${DLC_TAG}
ARG NEURON_SDK_VERSION
# The SDK image's own interpreter (images.json): /opt/conda/bin/python in the DLC, /usr/bin/python3 in LMI.
ARG TOOLCHAIN_PYTHON=/opt/conda/bin/python
COPY --from=uv /uv /usr/local/bin/uv

WORKDIR /opt/neuronforge
COPY docker/neuron-sdk/${NEURON_SDK_VERSION}.txt ./requirements-neuron.txt
COPY requirements-runtime.txt requirements-deploy.txt constraints.txt pyproject.toml README.md ./
# The base image already holds the SDK pinned by docker/neuron-sdk/<release>.txt; this re-asserts the pins
# in the toolchain's own interpreter, from AWS's repository (never PyPI's placeholders of the same names).
RUN "${TOOLCHAIN_PYTHON}" -m pip install --no-cache-dir --extra-index-url https://pip.repos.neuron.amazonaws.com \
        -r requirements-neuron.txt
# Airflow, its AWS provider, the Celery/PostgreSQL extras and neuronforge's runtime (CPU torch for the
# smoke reference) at the versions the rest of the deployment runs, in their own Python 3.11.
ENV UV_PYTHON_INSTALL_DIR=/opt/python \
    UV_LINK_MODE=copy \
    UV_NO_CACHE=1
RUN uv venv --python 3.11 /opt/airflow-venv \
    && uv pip install --python /opt/airflow-venv/bin/python \
        --extra-index-url https://download.pytorch.org/whl/cpu --index-strategy unsafe-best-match \
        -r requirements-runtime.txt -r requirements-deploy.txt -c constraints.txt
COPY neuronforge ./neuronforge
COPY neuronforge_toolchain ./neuronforge_toolchain
COPY neuronforge_airflow ./neuronforge_airflow
COPY catalog ./catalog
COPY dags /opt/airflow/dags
COPY docker/airflow_local_settings.py ./docker/airflow_local_settings.py
COPY docker/airflow_local_settings.py /opt/airflow/config/airflow_local_settings.py
RUN uv pip install --python /opt/airflow-venv/bin/python --no-deps -e .

ENV PATH=/opt/airflow-venv/bin:${PATH} \
    NEURON_SDK_VERSION=${NEURON_SDK_VERSION} \
    NEURONFORGE_TOOLCHAIN_PYTHON=${TOOLCHAIN_PYTHON} \
    NEURONFORGE_WORKER_ROLE=compile \
    AIRFLOW_HOME=/opt/airflow \
    AIRFLOW__CORE__LOAD_EXAMPLES=False \
    NEURONFORGE_HOME=/var/lib/neuronforge \
    NEURON_RT_LOG_LEVEL=WARNING
# The base images start their own server (the LMI image: DJL Serving); this one starts a Celery worker.
ENTRYPOINT []
CMD ["sh", "-c", "q=$(neuronforge worker-queues --sdk \"$NEURON_SDK_VERSION\" --role \"$NEURONFORGE_WORKER_ROLE\") || exit 2; exec airflow celery worker -q \"$q\" --concurrency 1"]
