"""libx264 through ctypes: change the rate between frames without a keyframe.

FFmpeg's encoder reads a rate only when it opens; libx264's own `x264_encoder_reconfig` takes it at the next
frame. The parameter offsets this binding reads are found and checked against the library at load
(`check_layouts`, through `loader`); the x264 build comes from the file name. A library that fails is not
used and the gateway goes back to FFmpeg's encoder.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from gateway.webrtc.codecs import loader

logger = logging.getLogger(__name__)

X264_CSP_I420 = 0x0002
X264_TYPE_AUTO = 0x0000
X264_TYPE_IDR = 0x0001
NAL_SPS = 7
NAL_PPS = 8

_PARAM_BYTES = 16384  # x264 build 165's x264_param_t is about 1.3 KiB
_PICTURE_BYTES = 1024  # x264_picture_t is about 250 bytes


class X264Error(RuntimeError):
    """A libx264 call failed, or the library's layout is not the one this module reads."""


class Nal(ctypes.Structure):
    """`x264_nal_t`."""

    _fields_ = [
        ("i_ref_idc", ctypes.c_int),
        ("i_type", ctypes.c_int),
        ("b_long_startcode", ctypes.c_int),
        ("i_first_mb", ctypes.c_int),
        ("i_last_mb", ctypes.c_int),
        ("i_payload", ctypes.c_int),
        ("p_payload", ctypes.c_void_p),
        ("i_padding", ctypes.c_int),
    ]


class Image(ctypes.Structure):
    """`x264_image_t`."""

    _fields_ = [
        ("i_csp", ctypes.c_int),
        ("i_plane", ctypes.c_int),
        ("i_stride", ctypes.c_int * 4),
        ("plane", ctypes.c_void_p * 4),
    ]


class Picture(ctypes.Structure):
    """`x264_picture_t`: its head up to the image, then room for the rest (set by `x264_picture_init`)."""

    _fields_ = [
        ("i_type", ctypes.c_int),
        ("i_qpplus1", ctypes.c_int),
        ("i_pic_struct", ctypes.c_int),
        ("b_keyframe", ctypes.c_int),
        ("i_pts", ctypes.c_int64),
        ("i_dts", ctypes.c_int64),
        ("param", ctypes.c_void_p),
        ("img", Image),
        ("rest", ctypes.c_ubyte * _PICTURE_BYTES),
    ]


ParamBuffer = ctypes.c_ubyte * _PARAM_BYTES


@dataclass(frozen=True)
class ParamOffsets:
    """Where the fields without a parse name are, in bytes into `x264_param_t`."""

    width: int
    height: int


@dataclass(frozen=True)
class EncodedFrame:
    data: bytes  # Annex B: start codes before every NAL unit
    pts: int
    keyframe: bool


class Libx264:
    """The loaded library, its build, and the parameter offsets it answered (build with `load()`)."""

    def __init__(self, lib: ctypes.CDLL, path: str) -> None:
        self.path = path
        self._lib = lib
        self.build = _build_of(path, lib)
        self._open = getattr(lib, f"x264_encoder_open_{self.build}")
        self._declare()
        self.offsets = self._find_offsets()

    def _declare(self) -> None:
        lib = self._lib
        p = ctypes.c_void_p
        lib.x264_param_default_preset.restype = ctypes.c_int
        lib.x264_param_default_preset.argtypes = [p, ctypes.c_char_p, ctypes.c_char_p]
        lib.x264_param_parse.restype = ctypes.c_int
        lib.x264_param_parse.argtypes = [p, ctypes.c_char_p, ctypes.c_char_p]
        lib.x264_param_apply_profile.restype = ctypes.c_int
        lib.x264_param_apply_profile.argtypes = [p, ctypes.c_char_p]
        self._open.restype = p
        self._open.argtypes = [p]
        lib.x264_encoder_reconfig.restype = ctypes.c_int
        lib.x264_encoder_reconfig.argtypes = [p, p]
        lib.x264_encoder_parameters.restype = None
        lib.x264_encoder_parameters.argtypes = [p, p]
        lib.x264_encoder_headers.restype = ctypes.c_int
        lib.x264_encoder_headers.argtypes = [
            p,
            ctypes.POINTER(ctypes.POINTER(Nal)),
            ctypes.POINTER(ctypes.c_int),
        ]
        lib.x264_encoder_encode.restype = ctypes.c_int
        lib.x264_encoder_encode.argtypes = [
            p,
            ctypes.POINTER(ctypes.POINTER(Nal)),
            ctypes.POINTER(ctypes.c_int),
            p,
            p,
        ]
        lib.x264_encoder_close.restype = None
        lib.x264_encoder_close.argtypes = [p]
        lib.x264_picture_init.restype = None
        lib.x264_picture_init.argtypes = [p]
        lib.x264_picture_alloc.restype = ctypes.c_int
        lib.x264_picture_alloc.argtypes = [p, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.x264_picture_clean.restype = None
        lib.x264_picture_clean.argtypes = [p]

    # -- parameters --------------------------------------------------------------------------------------

    def default_params(self, preset: str, tune: str | None) -> ctypes.Array[ctypes.c_ubyte]:
        params = ParamBuffer()
        if self._lib.x264_param_default_preset(params, preset.encode(), tune and tune.encode()) < 0:
            raise X264Error(f"x264 refused preset {preset!r} / tune {tune!r}")
        return params

    def parse(self, params: ctypes.Array[ctypes.c_ubyte], name: str, value: str) -> None:
        res = self._lib.x264_param_parse(params, name.encode(), value.encode())
        if res != 0:
            why = {-1: "unknown name", -2: "bad value", -3: "allocation failed"}.get(res, f"error {res}")
            raise X264Error(f"x264 option {name}={value}: {why}")

    def apply_profile(self, params: ctypes.Array[ctypes.c_ubyte], profile: str) -> None:
        if self._lib.x264_param_apply_profile(params, profile.encode()) < 0:
            raise X264Error(f"x264 refused profile {profile!r}")

    def set_int(self, params: ctypes.Array[ctypes.c_ubyte], offset: int, value: int) -> None:
        ctypes.c_uint32.from_buffer(params, offset).value = value & 0xFFFFFFFF

    def get_int(self, params: ctypes.Array[ctypes.c_ubyte], offset: int) -> int:
        return ctypes.c_int32.from_buffer(params, offset).value

    def _changed_ints(self, name: str, value: str) -> dict[int, int]:
        """The int-sized slots of a default `x264_param_t` that parsing `name=value` changes."""
        before = self.default_params("veryfast", None)
        after = self.default_params("veryfast", None)
        self.parse(after, name, value)
        return {
            offset: self.get_int(after, offset)
            for offset in range(0, _PARAM_BYTES, 4)
            if self.get_int(before, offset) != self.get_int(after, offset)
        }

    def _find_offsets(self) -> ParamOffsets:
        level = self._changed_ints("level", "41")
        if list(level.values()) != [41]:
            raise X264Error(f"x264 build {self.build}: level moved {level}, not one field")
        level_at = next(iter(level))
        csp = self.get_int(self.default_params("veryfast", None), level_at - 8)
        if csp != X264_CSP_I420:
            raise X264Error(f"x264 build {self.build}: csp {csp} two ints before the level: layout differs")
        return ParamOffsets(width=level_at - 16, height=level_at - 12)

    # -- encoder -----------------------------------------------------------------------------------------

    def open(self, params: ctypes.Array[ctypes.c_ubyte]) -> int:
        handle = self._open(params)
        if not handle:
            raise X264Error("x264_encoder_open refused the parameters (x264 logged why)")
        return int(handle)

    def parameters(self, handle: int) -> ctypes.Array[ctypes.c_ubyte]:
        params = ParamBuffer()
        self._lib.x264_encoder_parameters(handle, params)
        return params

    def reconfig(self, handle: int, params: ctypes.Array[ctypes.c_ubyte]) -> None:
        if self._lib.x264_encoder_reconfig(handle, params) < 0:
            raise X264Error("x264_encoder_reconfig refused the parameters")

    def headers(self, handle: int) -> list[tuple[int, bytes]]:
        """The SPS and PPS, as (NAL type, Annex B bytes); checks that x264 wrote them where `Nal` reads."""
        nals = ctypes.POINTER(Nal)()
        count = ctypes.c_int(0)
        size = self._lib.x264_encoder_headers(handle, ctypes.byref(nals), ctypes.byref(count))
        if size <= 0 or count.value <= 0:
            raise X264Error(f"x264_encoder_headers answered {size} bytes in {count.value} NAL units")
        units = [nals[index] for index in range(count.value)]
        if sum(unit.i_payload for unit in units) != size or any(
            later.p_payload != unit.p_payload + unit.i_payload
            for unit, later in zip(units, units[1:], strict=False)
        ):
            raise X264Error("x264's NAL units are not where x264_nal_t is declared to put them")
        return [(unit.i_type, ctypes.string_at(unit.p_payload, unit.i_payload)) for unit in units]

    def new_picture(self) -> Picture:
        picture = Picture()
        self._lib.x264_picture_init(ctypes.byref(picture))
        return picture

    def encode(self, handle: int, picture: Picture, output: Picture) -> EncodedFrame | None:
        nals = ctypes.POINTER(Nal)()
        count = ctypes.c_int(0)
        size = self._lib.x264_encoder_encode(
            handle, ctypes.byref(nals), ctypes.byref(count), ctypes.byref(picture), ctypes.byref(output)
        )
        if size < 0:
            raise X264Error(f"x264_encoder_encode failed ({size})")
        if size == 0:
            return None
        # "the payloads of all output NALs are guaranteed to be sequential in memory" (x264.h)
        return EncodedFrame(ctypes.string_at(nals[0].p_payload, size), output.i_pts, bool(output.b_keyframe))

    def close(self, handle: int) -> None:
        self._lib.x264_encoder_close(handle)

    def check_layouts(self) -> None:
        """Raise X264Error unless a picture and the headers read as declared (see the module docstring)."""
        picture = self.new_picture()
        if self._lib.x264_picture_alloc(ctypes.byref(picture), X264_CSP_I420, 64, 48) < 0:
            raise X264Error("x264_picture_alloc failed")
        try:
            image = picture.img
            got = (image.i_csp, image.i_plane, image.i_stride[0], image.i_stride[1], image.i_stride[2])
            planes_ok = bool(image.plane[0]) and image.plane[1] == image.plane[0] + 64 * 48
            if got != (X264_CSP_I420, 3, 64, 32, 32) or not planes_ok:
                raise X264Error(
                    f"x264 build {self.build}: an allocated picture reads {got}; the layout differs"
                )
        finally:
            self._lib.x264_picture_clean(ctypes.byref(picture))
        params = self.default_params("veryfast", "zerolatency")
        self.set_int(params, self.offsets.width, 64)
        self.set_int(params, self.offsets.height, 48)
        self.parse(params, "log", "-1")
        handle = self.open(params)
        try:
            opened = self.parameters(handle)
            size = (self.get_int(opened, self.offsets.width), self.get_int(opened, self.offsets.height))
            types = [nal_type for nal_type, _ in self.headers(handle)]
            if size != (64, 48) or types[:2] != [NAL_SPS, NAL_PPS]:
                raise X264Error(
                    f"x264 build {self.build}: opened at {size}, headers {types}; the layout differs"
                )
        finally:
            self.close(handle)


def _build_of(path: str, lib: ctypes.CDLL) -> int:
    """The x264 build: from the file name (`libx264.so.165`, `libx264-<hash>.so.165`), checked by the open
    function of that build being there."""
    match = re.search(r"\.so\.(\d+)", Path(path).name)
    builds = [int(match.group(1))] if match else list(range(200, 140, -1))
    for build in builds:
        if hasattr(lib, f"x264_encoder_open_{build}"):
            return build
    raise X264Error(f"{path}: no x264_encoder_open_<build> for builds {builds[0]}..{builds[-1]}")


def candidate_paths() -> list[str]:
    """PyAV's bundled libx264 first (already loaded by libavcodec), then the system's."""
    return loader.candidate_paths("x264")


def load(paths: list[str] | None = None) -> Libx264 | None:
    """The first usable libx264 with the layouts this module declares, or None (logged once by the caller)."""
    return loader.load_first("x264", paths, Libx264, (X264Error,))
