"""libvpx's VP8 encoder through ctypes: change the rate between frames without a keyframe.

FFmpeg's encoder reads a rate only when it opens, so each change cost a keyframe; libvpx's own
`vpx_codec_enc_config_set` takes it at the next frame. The structure layouts declared here are checked
against the library at load (`check_layouts`, through `loader`); a library that fails is not used and the
gateway goes back to FFmpeg's encoder.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from dataclasses import dataclass

from gateway.webrtc.codecs import loader

logger = logging.getLogger(__name__)

VPX_CODEC_OK = 0
VPX_CODEC_ABI_MISMATCH = 3
VPX_IMG_FMT_I420 = 0x102  # VPX_IMG_FMT_PLANAR | 2
VPX_CBR = 1
VPX_KF_AUTO = 1
VPX_CODEC_CX_FRAME_PKT = 0
VPX_FRAME_IS_KEY = 0x1
VPX_EFLAG_FORCE_KF = 0x1
VPX_DL_REALTIME = 1

# enum vp8e_enc_control_id (vpx/vp8cx.h)
VP8E_SET_CPUUSED = 13
VP8E_SET_NOISE_SENSITIVITY = 15
VP8E_SET_STATIC_THRESHOLD = 17
VP8E_SET_TOKEN_PARTITIONS = 18
VP8E_GET_LAST_QUANTIZER_64 = 20

_CFG_BYTES = 4096  # libvpx 1.15's vpx_codec_enc_cfg_t is under 1 KiB
_CTX_BYTES = 256  # vpx_codec_ctx_t is 56 bytes on LP64


class _FixedBuf(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_void_p), ("sz", ctypes.c_size_t)]


class EncoderConfig(ctypes.Structure):
    """`vpx_codec_enc_cfg_t`: its stable head, then libvpx's own defaults for the rest."""

    _fields_ = [
        ("g_usage", ctypes.c_uint),
        ("g_threads", ctypes.c_uint),
        ("g_profile", ctypes.c_uint),
        ("g_w", ctypes.c_uint),
        ("g_h", ctypes.c_uint),
        ("g_bit_depth", ctypes.c_int),
        ("g_input_bit_depth", ctypes.c_uint),
        ("g_timebase_num", ctypes.c_int),
        ("g_timebase_den", ctypes.c_int),
        ("g_error_resilient", ctypes.c_uint32),
        ("g_pass", ctypes.c_int),
        ("g_lag_in_frames", ctypes.c_uint),
        ("rc_dropframe_thresh", ctypes.c_uint),
        ("rc_resize_allowed", ctypes.c_uint),
        ("rc_scaled_width", ctypes.c_uint),
        ("rc_scaled_height", ctypes.c_uint),
        ("rc_resize_up_thresh", ctypes.c_uint),
        ("rc_resize_down_thresh", ctypes.c_uint),
        ("rc_end_usage", ctypes.c_int),
        ("rc_twopass_stats_in", _FixedBuf),
        ("rc_firstpass_mb_stats_in", _FixedBuf),
        ("rc_target_bitrate", ctypes.c_uint),  # kbit/s
        ("rc_min_quantizer", ctypes.c_uint),
        ("rc_max_quantizer", ctypes.c_uint),
        ("rc_undershoot_pct", ctypes.c_uint),
        ("rc_overshoot_pct", ctypes.c_uint),
        ("rc_buf_sz", ctypes.c_uint),  # ms
        ("rc_buf_initial_sz", ctypes.c_uint),
        ("rc_buf_optimal_sz", ctypes.c_uint),
        ("rc_2pass_vbr_bias_pct", ctypes.c_uint),
        ("rc_2pass_vbr_minsection_pct", ctypes.c_uint),
        ("rc_2pass_vbr_maxsection_pct", ctypes.c_uint),
        ("rc_2pass_vbr_corpus_complexity", ctypes.c_uint),
        ("kf_mode", ctypes.c_int),
        ("kf_min_dist", ctypes.c_uint),
        ("kf_max_dist", ctypes.c_uint),
    ]


class _ConfigBuffer(ctypes.Structure):
    _fields_ = [
        ("cfg", EncoderConfig),
        ("rest", ctypes.c_ubyte * (_CFG_BYTES - ctypes.sizeof(EncoderConfig))),
    ]


class Image(ctypes.Structure):
    """`vpx_image_t`."""

    _fields_ = [
        ("fmt", ctypes.c_int),
        ("cs", ctypes.c_int),
        ("range", ctypes.c_int),
        ("w", ctypes.c_uint),
        ("h", ctypes.c_uint),
        ("bit_depth", ctypes.c_uint),
        ("d_w", ctypes.c_uint),
        ("d_h", ctypes.c_uint),
        ("r_w", ctypes.c_uint),
        ("r_h", ctypes.c_uint),
        ("x_chroma_shift", ctypes.c_uint),
        ("y_chroma_shift", ctypes.c_uint),
        ("planes", ctypes.c_void_p * 4),
        ("stride", ctypes.c_int * 4),
        ("bps", ctypes.c_int),
        ("user_priv", ctypes.c_void_p),
        ("img_data", ctypes.c_void_p),
        ("img_data_owner", ctypes.c_int),
        ("self_allocd", ctypes.c_int),
        ("fb_priv", ctypes.c_void_p),
    ]


class _FramePacket(ctypes.Structure):
    """`vpx_codec_cx_pkt_t` for kind == VPX_CODEC_CX_FRAME_PKT: `kind`, then the union's `frame` member."""

    _fields_ = [
        ("kind", ctypes.c_int),
        ("buf", ctypes.c_void_p),
        ("sz", ctypes.c_size_t),
        ("pts", ctypes.c_int64),
        ("duration", ctypes.c_ulong),
        ("flags", ctypes.c_uint32),
        ("partition_id", ctypes.c_int),
    ]


class LibvpxError(RuntimeError):
    """A libvpx call failed; the message is libvpx's own."""


@dataclass(frozen=True)
class EncodedFrame:
    data: bytes
    pts: int
    keyframe: bool


class Libvpx:
    """The loaded library and the encoder ABI version it answers to (build with `load()`)."""

    def __init__(self, lib: ctypes.CDLL, path: str) -> None:
        self.path = path
        self._lib = lib
        self._declare()
        self.version = (lib.vpx_codec_version_str() or b"?").decode(errors="replace")
        self.abi_version = self._find_abi_version()

    def _declare(self) -> None:
        lib = self._lib
        p = ctypes.c_void_p
        lib.vpx_codec_version_str.restype = ctypes.c_char_p
        lib.vpx_codec_version_str.argtypes = []
        lib.vpx_codec_vp8_cx.restype = p
        lib.vpx_codec_vp8_cx.argtypes = []
        lib.vpx_codec_enc_config_default.restype = ctypes.c_int
        lib.vpx_codec_enc_config_default.argtypes = [p, p, ctypes.c_uint]
        lib.vpx_codec_enc_init_ver.restype = ctypes.c_int
        lib.vpx_codec_enc_init_ver.argtypes = [p, p, p, ctypes.c_long, ctypes.c_int]
        lib.vpx_codec_enc_config_set.restype = ctypes.c_int
        lib.vpx_codec_enc_config_set.argtypes = [p, p]
        lib.vpx_codec_encode.restype = ctypes.c_int
        lib.vpx_codec_encode.argtypes = [p, p, ctypes.c_int64, ctypes.c_ulong, ctypes.c_long, ctypes.c_ulong]
        lib.vpx_codec_get_cx_data.restype = ctypes.POINTER(_FramePacket)
        lib.vpx_codec_get_cx_data.argtypes = [p, ctypes.POINTER(ctypes.c_void_p)]
        # variadic in C (vpx_codec_control_(ctx, id, ...)); every control used here takes one int, which the
        # x86-64 and AArch64 Linux conventions pass in the same register as a fixed argument
        lib.vpx_codec_control_.restype = ctypes.c_int
        lib.vpx_codec_control_.argtypes = [p, ctypes.c_int, ctypes.c_int]
        lib.vpx_codec_destroy.restype = ctypes.c_int
        lib.vpx_codec_destroy.argtypes = [p]
        lib.vpx_codec_error.restype = ctypes.c_char_p
        lib.vpx_codec_error.argtypes = [p]
        lib.vpx_codec_error_detail.restype = ctypes.c_char_p
        lib.vpx_codec_error_detail.argtypes = [p]
        lib.vpx_img_wrap.restype = ctypes.POINTER(Image)
        lib.vpx_img_wrap.argtypes = [p, ctypes.c_int, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, p]

    def default_config(self) -> EncoderConfig:
        buffer = _ConfigBuffer()
        self._check(
            None,
            self._lib.vpx_codec_enc_config_default(self._lib.vpx_codec_vp8_cx(), ctypes.byref(buffer), 0),
        )
        return buffer.cfg  # shares the buffer's memory: libvpx's defaults past the declared head stay

    def _find_abi_version(self) -> int:
        cfg = self.default_config()
        for version in range(1, 100):
            ctx = (ctypes.c_ubyte * _CTX_BYTES)()
            res = self._lib.vpx_codec_enc_init_ver(
                ctx, self._lib.vpx_codec_vp8_cx(), ctypes.byref(cfg), 0, version
            )
            if res == VPX_CODEC_ABI_MISMATCH:
                continue
            if res == VPX_CODEC_OK:
                self._lib.vpx_codec_destroy(ctx)
                return version
            raise LibvpxError(
                f"libvpx {self.version}: the default VP8 configuration does not open (error {res})"
            )
        raise LibvpxError(f"libvpx {self.version}: no encoder ABI version in 1..99 is accepted")

    def check_layouts(self) -> None:
        """Raise LibvpxError unless the declared offsets read what libvpx wrote (see the module docstring)."""
        cfg = self.default_config()
        expected = {
            "g_w": 320, "g_h": 240, "g_bit_depth": 8, "g_input_bit_depth": 8, "g_timebase_num": 1,
            "g_timebase_den": 30, "rc_scaled_width": 1, "rc_scaled_height": 1, "rc_resize_up_thresh": 60,
            "rc_resize_down_thresh": 30, "rc_target_bitrate": 256, "rc_min_quantizer": 4,
            "rc_max_quantizer": 63, "rc_undershoot_pct": 100, "rc_overshoot_pct": 100, "rc_buf_sz": 6000,
            "rc_buf_initial_sz": 4000, "rc_buf_optimal_sz": 5000, "kf_mode": VPX_KF_AUTO, "kf_max_dist": 128,
        }  # fmt: skip
        wrong = {name: getattr(cfg, name) for name, value in expected.items() if getattr(cfg, name) != value}
        if wrong:
            raise LibvpxError(f"libvpx {self.version}: VP8 defaults read {wrong}; the config layout differs")
        image = Image()
        data = (ctypes.c_ubyte * (34 * 22 * 3 // 2))()
        self._lib.vpx_img_wrap(ctypes.byref(image), VPX_IMG_FMT_I420, 34, 22, 1, data)
        base = ctypes.addressof(data)
        got = (image.fmt, image.d_w, image.d_h, image.x_chroma_shift, image.y_chroma_shift, image.bps,
               image.planes[0], image.planes[1], image.planes[2], image.stride[0],
               image.stride[1])  # fmt: skip
        want = (VPX_IMG_FMT_I420, 34, 22, 1, 1, 12, base, base + 34 * 22, base + 34 * 22 + 17 * 11, 34, 17)
        if got != want:
            raise LibvpxError(f"libvpx {self.version}: a wrapped image reads {got}, not {want}")

    def new_context(self, cfg: EncoderConfig) -> ctypes.Array[ctypes.c_ubyte]:
        ctx = (ctypes.c_ubyte * _CTX_BYTES)()
        res = self._lib.vpx_codec_enc_init_ver(
            ctx, self._lib.vpx_codec_vp8_cx(), ctypes.byref(cfg), 0, self.abi_version
        )
        self._check(ctx, res, "vpx_codec_enc_init")
        return ctx

    def control(self, ctx: ctypes.Array[ctypes.c_ubyte], control_id: int, value: int) -> None:
        self._check(ctx, self._lib.vpx_codec_control_(ctx, control_id, value), f"control {control_id}")

    def set_config(self, ctx: ctypes.Array[ctypes.c_ubyte], cfg: EncoderConfig) -> None:
        self._check(
            ctx, self._lib.vpx_codec_enc_config_set(ctx, ctypes.byref(cfg)), "vpx_codec_enc_config_set"
        )

    def wrap(self, image: Image, width: int, height: int) -> None:
        """Fill `image`'s format and geometry for an I420 picture (its planes are set per frame)."""
        scratch = (ctypes.c_ubyte * 1)()
        if not self._lib.vpx_img_wrap(ctypes.byref(image), VPX_IMG_FMT_I420, width, height, 1, scratch):
            raise LibvpxError(f"vpx_img_wrap refused {width}x{height}")

    def encode(
        self, ctx: ctypes.Array[ctypes.c_ubyte], image: Image, pts: int, duration: int, flags: int
    ) -> list[EncodedFrame]:
        res = self._lib.vpx_codec_encode(ctx, ctypes.byref(image), pts, duration, flags, VPX_DL_REALTIME)
        self._check(ctx, res, "vpx_codec_encode")
        frames: list[EncodedFrame] = []
        iterator = ctypes.c_void_p(None)
        while True:
            packet = self._lib.vpx_codec_get_cx_data(ctx, ctypes.byref(iterator))
            if not packet:
                return frames
            frame = packet.contents
            if frame.kind == VPX_CODEC_CX_FRAME_PKT:
                frames.append(
                    EncodedFrame(
                        ctypes.string_at(frame.buf, frame.sz), frame.pts, bool(frame.flags & VPX_FRAME_IS_KEY)
                    )
                )

    def destroy(self, ctx: ctypes.Array[ctypes.c_ubyte]) -> None:
        self._lib.vpx_codec_destroy(ctx)

    def _check(self, ctx: ctypes.Array[ctypes.c_ubyte] | None, res: int, what: str = "libvpx") -> None:
        if res == VPX_CODEC_OK:
            return
        if ctx is None:
            raise LibvpxError(f"{what} failed (error {res})")
        message = (self._lib.vpx_codec_error(ctx) or b"").decode(errors="replace")
        detail = (self._lib.vpx_codec_error_detail(ctx) or b"").decode(errors="replace")
        raise LibvpxError(f"{what}: {message}" + (f" ({detail})" if detail else ""))


def candidate_paths() -> list[str]:
    """PyAV's bundled libvpx first (already loaded by libavcodec), then the system's."""
    return loader.candidate_paths("vpx")


def load(paths: list[str] | None = None) -> Libvpx | None:
    """The first usable libvpx with the layouts this module declares, or None (logged once by the caller)."""
    return loader.load_first("vpx", paths, Libvpx, (LibvpxError,))
