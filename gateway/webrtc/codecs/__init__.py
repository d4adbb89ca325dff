"""Video encoders that change bitrate between frames: libvpx and libx264 called through ctypes."""
