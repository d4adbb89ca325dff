"""The options of the network, the media and the models: each one's key, group, help, unit and fields
(gateway.cli.option says how a default is found)."""

from __future__ import annotations

from gateway.cli import values as v
from gateway.cli.option import Option

NETWORK = (
    Option("host", "network", "address to listen on", fields=("host",)),
    Option("port", "network", "HTTP port", kind="int", fields=("port",)),
    Option(
        "public_url",
        "network",
        "this replica's own reachable base URL (e.g. https://gw-3.media.example): WHIP/WHEP Location headers "
        "become absolute so PATCH/DELETE reach this replica behind a balancer",
        fields=("public_url",),
        to_field=v.text_or_none,
        unset="none, relative Location headers",
        example="https://gw-3.media.example",
    ),
    Option(
        "stun",
        "network",
        "STUN server URL advertised and used (repeatable)",
        kind="list",
        fields=("ice.stun",),
    ),
    Option(
        "turn",
        "network",
        "TURN server as url[,username,credential] (repeatable)",
        kind="list",
        fields=("ice.turn",),
        to_field=v.turn_servers,
        to_raw=list,
    ),
    Option(
        "ice_loopback_only",
        "network",
        "gather ICE candidates on 127.0.0.1 only (tests, local load generation)",
        kind="switch",
        fields=("ice.host_addresses",),
        to_field=v.loopback_only,
        to_raw=bool,
    ),
    Option(
        "ice_udp_ports",
        "network",
        "bind the media's UDP sockets within this port range, e.g. 40000-40999, to open in a firewall",
        metavar="FIRST-LAST",
        fields=("ice.udp_ports",),
        to_field=v.port_range,
        unset="any free port",
        example="40000-40999",
    ),
    Option(
        "ice_public_address",
        "network",
        "advertise host candidates at this address instead of the machine's own: the public side of a 1:1 "
        "NAT, or a node's external address for hostNetwork pods; 'auto' asks the first --stun server at "
        "start-up",
        metavar="IP|auto",
        unset="the interface addresses",
        example="203.0.113.7",
    ),
    Option(
        "media_dscp",
        "network",
        "DSCP mark on every media packet the gateway sends: a name (af41 for video per RFC 8837, ef, cs1, "
        "...) or 0-63",
        fields=("ice.dscp",),
        to_field=v.dscp,
        unset="unmarked",
        example="af41",
    ),
    Option(
        "no_front_process",
        "network",
        "serve HTTP from the media process itself instead of a front process that refuses bad requests and "
        "forwards the rest over a private Unix socket (gateway.front)",
        kind="switch",
        negate=True,
        fields=("front_process",),
    ),
    Option(
        "front_nice",
        "network",
        "the front process's priority below the media process's, 0-19",
        kind="int",
        fields=("front_nice",),
    ),
    Option(
        "front_cpus",
        "network",
        "CPUs the front process runs on, e.g. 3 or 2-3; with the gateway itself started under `taskset -c` "
        "on the others, request floods stay off the media's cores",
        kind="csv",
        fields=("front_cpus",),
        to_field=v.cpu_list,
        unset="any the gateway may use",
        example="3",
    ),
)

MEDIA = (
    Option(
        "processors",
        "media",
        "default processors: face_swapper[,face_enhancer] or none (pass-through); a WHIP ?processors= "
        "overrides",
        kind="csv",
        fields=("pipeline.processors",),
        to_field=v.processors,
        to_raw=v.processors_raw,
    ),
    Option(
        "mask_regions",
        "media",
        "target regions kept from the frame, not swapped, comma-separated: mouth, eyes (the eye openings), "
        "eye_area (eyes with lids and lashes) or none; a WHIP ?mask= overrides",
        kind="csv",
        fields=("pipeline.keep_regions",),
        to_field=v.mask_regions,
        to_raw=v.processors_raw,
    ),
    Option(
        "face_selector",
        "media",
        "faces swapped: many or one (the largest); a WHIP ?faces= overrides "
        "(?faces=reference&reference=<source id>: the face most like an uploaded image, needs ArcFace)",
        fields=("pipeline.face_selector",),
        to_field=v.face_selector,
    ),
    Option(
        "poisson_blend",
        "media",
        "mesh_warp: the relit face Poisson-cloned (seamless) instead of pasted through a feathered mask",
        kind="switch",
        fields=("pipeline.poisson",),
    ),
    Option(
        "face_shape",
        "media",
        "mesh_warp: how much of the source's face shape (outline, jaw, proportions) the swap takes, 0..1 "
        "(0 = the target's); a WHIP ?shape= overrides",
        kind="float",
        fields=("pipeline.shape",),
        to_field=v.face_shape,
    ),
    Option(
        "mask_blur",
        "media",
        "inswapper/GFPGAN paste mask blur, 0..1",
        kind="float",
        fields=("pipeline.mask.blur",),
    ),
    Option(
        "mask_padding",
        "media",
        "inswapper/GFPGAN paste mask padding in %: top,right,bottom,left",
        kind="csv",
        fields=("pipeline.mask.padding",),
        to_field=v.padding,
    ),
    Option(
        "default_source",
        "media",
        "source face image used when WHIP gives no ?source=",
        kind="path",
        fields=("sessions.default_source",),
        unset="none",
        example="/srv/faces/host.png",
    ),
    Option(
        "late_policy",
        "media",
        "frame not processed in time: repeat the last processed one (never leaks an unswapped face) or pass "
        "the original through",
        choices=v.LATE_POLICIES,
        fields=("sessions.late_policy",),
        to_field=v.late_policy,
        to_raw=lambda policy: policy.value,
    ),
    Option(
        "repeat_gap_ms",
        "media",
        "--late-policy repeat: re-send the last picture only after this long without a frame (0 = for every "
        "frame not processed)",
        kind="float",
        unit="ms",
        fields=("sessions.repeat_gap_ms",),
    ),
    Option(
        "video_bitrate",
        "media",
        "ceiling of each processed stream's bitrate in kbit/s; the receivers' feedback moves it below; auto: "
        "by the picture's size, as libwebrtc does: 1700 up to 640x480, 2000 up to 960x540, 2500 above, and "
        "never under 1000",
        metavar="KBPS|auto",
        fields=("sessions.bitrate",),
        to_field=v.bitrate_kbps,
        to_raw=v.bitrate_raw,
    ),
    Option(
        "no_uplink_loss_cap",
        "media",
        "send publishers aiortc's delay-based REMB only, without the cap from the loss and the queue seen on "
        "their stream (gateway.webrtc.congestion.uplink_rate)",
        kind="switch",
        negate=True,
        fields=("sessions.uplink.enabled",),
    ),
    Option(
        "no_transport_cc",
        "media",
        "answer publishers without transport-cc: they then adapt to REMB and loss only "
        "(gateway.webrtc.congestion.transport_cc)",
        kind="switch",
        negate=True,
        fields=("sessions.transport_cc",),
    ),
    Option(
        "no_live_bitrate",
        "media",
        "reopen FFmpeg's VP8/H.264 encoder, with a keyframe, at each new bitrate instead of changing "
        "libvpx's or libx264's rate between frames (gateway.webrtc.codecs.vp8_encoder, h264_encoder)",
        kind="switch",
        negate=True,
        fields=("sessions.live_bitrate",),
    ),
    Option(
        "no_hardware_codecs",
        "media",
        "decode and encode in software even where the GPU has NVDEC / NVENC (otherwise hardware where it "
        "opens, software elsewhere; /api/stats decoder and encoder say which runs)",
        kind="switch",
        negate=True,
        fields=("sessions.hardware_codecs",),
    ),
    Option(
        "no_audio",
        "media",
        "answer every audio m-line inactive instead of relaying the publisher's Opus to WHEP viewers",
        kind="switch",
        negate=True,
        fields=("sessions.audio.enabled",),
    ),
    Option(
        "no_mark",
        "media",
        "send output frames without the invisible mark that says they are synthetic (engines.marking; "
        "logged at every start and shown in /api/stats)",
        kind="switch",
        negate=True,
        fields=("sessions.marking.enabled",),
    ),
    Option(
        "mark_key_file",
        "media",
        "read the mark's payload key from this file (a mounted Secret): with it every frame also carries "
        "the key id, a session code and the minute, readable only with the key",
        kind="path",
        unset="public layer only",
        example="/etc/livefuse/mark.key",
    ),
    Option(
        "disclosure_label",
        "media",
        "text drawn on every output frame (e.g. 'AI-generated'); per tenant in --tenants-file, per session "
        "with ?label= on WHIP and live through PATCH",
        fields=("sessions.marking.label",),
        to_field=v.text_or_none,
        unset="none",
        example="AI-generated",
    ),
)

MODELS = (
    Option(
        "model_dir",
        "models",
        "model directory",
        kind="path",
        fields=("model_dir",),
        unset="$LIVEFUSE_MODEL_DIR, else ~/.cache/livefuse/models",
        example="/models",
    ),
    Option(
        "swapper",
        "models",
        "swapper model: mesh_warp (bundled) | inswapper_128 (bring your own; non-commercial licence)",
        fields=("pipeline.swapper",),
    ),
    Option(
        "enhancer",
        "models",
        "enhancer model: detail (bundled) | gfpgan_1.4 (bring your own)",
        fields=("pipeline.enhancer",),
    ),
    Option(
        "detector_size",
        "models",
        "face detector letterbox size, multiple of 32",
        kind="int",
        fields=("pipeline.detector_size",),
    ),
    Option(
        "detector_score",
        "models",
        "face detector's confidence threshold, 0..1: lower also finds small, turned or dim faces (and more "
        "false ones), higher only clear ones",
        kind="float",
        fields=("pipeline.detector_score",),
    ),
    Option(
        "engine",
        "models",
        "inference backend (triton = a Triton Inference Server at --triton-url; torch = PyTorch via "
        "onnx2torch, on --providers cuda or cpu)",
        choices=("onnxruntime", "tensorrt", "triton", "torch"),
        fields=("pipeline.engine.backend",),
    ),
    Option(
        "providers",
        "models",
        "comma list of ONNX Runtime providers, in order: cpu,cuda,tensorrt",
        kind="csv",
        fields=("pipeline.engine.providers",),
    ),
    Option(
        "device_id",
        "models",
        "GPU index for cuda/tensorrt",
        kind="int",
        fields=("pipeline.engine.device_id",),
    ),
    Option(
        "fp16",
        "models",
        "FP16 engines (ORT CUDA/TensorRT providers; fp16 plans; torch)",
        kind="switch",
        fields=("pipeline.engine.fp16",),
    ),
    Option(
        "trt_cache_dir",
        "models",
        "--engine tensorrt: directory of plans built by scripts/build_engines.py; --providers tensorrt: "
        "ORT's engine + timing cache",
        kind="path",
        fields=("pipeline.engine.trt_cache_dir",),
        unset="none",
        example="/models/plans",
    ),
    Option(
        "intra_op_threads",
        "models",
        "ONNX Runtime threads per engine call (OpenCV's for the image work follow)",
        kind="int",
        fields=("pipeline.engine.intra_op_threads",),
        unset="1 on the CPU with several workers, else all cores",
        example=1,
    ),
    Option(
        "contexts",
        "models",
        "--engine tensorrt|torch: execution contexts (CUDA streams)",
        kind="int",
        fields=("pipeline.engine.contexts",),
    ),
    Option(
        "triton_url",
        "models",
        "--engine triton: gRPC endpoint HOST:PORT",
        fields=("pipeline.engine.triton.url",),
    ),
    Option(
        "triton_model_prefix",
        "models",
        "--engine triton: prefix of the repository's model names",
        fields=("pipeline.engine.triton.model_prefix",),
    ),
    Option(
        "triton_shm",
        "models",
        "--engine triton: pass tensors through system shared memory (server on the same host only)",
        kind="switch",
        fields=("pipeline.engine.triton.shm",),
    ),
    Option(
        "triton_timeout_s",
        "models",
        "--engine triton: per-request deadline",
        kind="float",
        unit="s",
        fields=("pipeline.engine.triton.timeout_s",),
    ),
    Option(
        "triton_connect_timeout_s",
        "models",
        "--engine triton: at start-up, wait this long for the server and its models",
        kind="float",
        unit="s",
        fields=("pipeline.engine.triton.connect_timeout_s",),
    ),
)
