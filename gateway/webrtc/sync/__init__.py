"""Audio/video sync: capture clocks, taps on aiortc's receivers, sender reports restamped to the capture
clock."""
