"""The per-session media path: receive newest frame, schedule, apply the late policy, encode once, fan out."""
