"""What tests share and that is not a fixture: a gateway on 127.0.0.1, WHIP/WHEP peers, fakes for the
pipeline and the monitor, media and SDP samples, waits; stand-in ONNX graphs, encoded streams, device checks;
the third parties tests drive (Janus, Triton, a WHIP endpoint, GStreamer's publisher, Chromium probes run as
`python -m tests.harness.<probe>` inside a namespace); and the machine probes (GPU needs, UDP ports, k8s
rendering, a kubelet's environment). Fixtures live in conftest.py files and build on these; no test module
imports another test module or a conftest."""
