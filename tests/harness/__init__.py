"""What tests share and that is not a fixture: a gateway on 127.0.0.1, WHIP/WHEP peers, fakes for the
pipeline and the monitor, media and SDP samples, waits. Fixtures live in conftest.py files and build on these;
no test module imports another test module or a conftest."""
