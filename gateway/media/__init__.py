"""The per-session frame path: newest frame, late policy, YUV reuse, encode once, fan out; the audio relay."""
