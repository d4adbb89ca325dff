"""Congestion control: each pure rate policy beside the adapter that feeds it from aiortc's RTCP.

Send side: `bitrate` (+ `queue_delay`, `send_history`) is fed by `sender_feedback` and `transport_cc`;
retransmissions by `retransmit_budget` through `retransmit_limit`. Receive side: `uplink_rate` is fed by
`uplink_feedback` and caps the REMB returned to a publisher.
"""
