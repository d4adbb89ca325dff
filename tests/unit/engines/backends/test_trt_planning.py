"""GPU-free TensorRT decisions: plan names, plan choice, profiles, buckets, buffer sizes, profile shapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from engines.backends.trt_planning import (
    BatchProfile,
    PlanKey,
    TensorLayout,
    aligned,
    assign_profiles,
    choose_bucket,
    choose_profile,
    dtype_of,
    graph_buckets,
    itemsize_of,
    nbytes,
    parse_plan_filename,
    parse_shape_arg,
    plan_buffers,
    plan_filename,
    plan_model_name,
    profile_shapes,
    resolve_shape,
    select_plan,
    shape_string,
    trt_version_tag,
)


def test_plan_filename_round_trip() -> None:
    key = PlanKey("inswapper_128", "10.13", (9, 0), "fp16", 1, 16)
    name = plan_filename(key)
    assert name == "inswapper_128.trt10.13.sm90.fp16.b1-16.plan"
    assert parse_plan_filename(name) == key
    assert parse_plan_filename("inswapper_128.onnx") is None
    assert parse_plan_filename("x.trt10.sm120.fp32.b2-8.plan") == PlanKey("x", "10", (12, 0), "fp32", 2, 8)


def test_plan_filename_rejects_bad_fields() -> None:
    with pytest.raises(ValueError):
        plan_filename(PlanKey("m", "10.13", (8, 9), "int8", 1, 4))
    with pytest.raises(ValueError):
        plan_filename(PlanKey("m.dyn", "10.13", (8, 9), "fp32", 1, 4))


def test_model_name_and_version_tag() -> None:
    assert plan_model_name(Path("/x/face_landmark_468.dyn.onnx")) == "face_landmark_468"
    assert trt_version_tag("10.13.2.6") == "10.13"


def test_select_plan_matches_version_gpu_precision_and_prefers_widest() -> None:
    names = [
        "m.trt10.13.sm90.fp32.b1-8.plan",
        "m.trt10.13.sm90.fp32.b1-32.plan",
        "m.trt10.13.sm89.fp32.b1-64.plan",  # other GPU
        "m.trt10.12.sm90.fp32.b1-64.plan",  # other TensorRT minor
        "m.trt10.13.sm90.fp16.b1-64.plan",
        "other.trt10.13.sm90.fp32.b1-64.plan",
        "notes.txt",
    ]
    assert select_plan(names, "m", "10.13.2.6", (9, 0), "fp32") == "m.trt10.13.sm90.fp32.b1-32.plan"
    assert select_plan(names, "m", "10.13.0", (9, 0), "fp16") == "m.trt10.13.sm90.fp16.b1-64.plan"
    assert select_plan(names, "m", "10.13", (8, 0), "fp32") is None
    assert select_plan(names, "m", "11.0", (9, 0), None) is None


def test_choose_profile_prefers_nearest_opt() -> None:
    profiles = [BatchProfile(1, 1, 4), BatchProfile(1, 8, 16), BatchProfile(8, 32, 32)]
    assert choose_profile(profiles, 1) == 0
    assert choose_profile(profiles, 6) == 1
    assert choose_profile(profiles, 30) == 2
    with pytest.raises(ValueError):
        choose_profile(profiles, 33)
    with pytest.raises(ValueError):
        BatchProfile(4, 2, 8)


def test_assign_profiles_never_shares_a_profile() -> None:
    assert assign_profiles(4, 2) == [0, 1]
    assert assign_profiles(2, 3) == [0, 1]
    assert assign_profiles(0, 1) == [0]
    with pytest.raises(ValueError):
        assign_profiles(2, 0)


def test_graph_buckets_and_choice() -> None:
    assert graph_buckets(BatchProfile(1, 8, 16)) == (1, 2, 4, 8, 16)
    assert graph_buckets(BatchProfile(1, 6, 12)) == (1, 2, 4, 8, 12)
    assert graph_buckets(BatchProfile(3, 4, 8)) == (3, 4, 8)
    buckets = graph_buckets(BatchProfile(1, 8, 16))
    assert [choose_bucket(buckets, n) for n in (1, 3, 5, 9, 16)] == [1, 4, 8, 16, 16]
    with pytest.raises(ValueError):
        choose_bucket(buckets, 17)


def test_dtypes_and_sizes() -> None:
    assert dtype_of("DataType.FLOAT") == "float32" and itemsize_of("DataType.HALF") == 2
    assert dtype_of("INT64") == "int64"
    with pytest.raises(ValueError):
        dtype_of("DataType.FP8")
    assert resolve_shape((-1, 3, 128, 128), 8) == (8, 3, 128, 128)
    with pytest.raises(ValueError):
        resolve_shape((-1, 3, -1, -1), 8)
    assert nbytes((8, 3, 128, 128), 4) == 8 * 3 * 128 * 128 * 4
    assert aligned(1) == 256 and aligned(256) == 256 and aligned(257) == 512


def test_plan_buffers_sized_for_max_batch() -> None:
    tensors = [
        TensorLayout("target", "DataType.FLOAT", (-1, 3, 128, 128), True),
        TensorLayout("source", "DataType.FLOAT", (-1, 512), True),
        TensorLayout("output", "DataType.HALF", (-1, 3, 128, 128), False),
    ]
    plan = plan_buffers(tensors, 16)
    assert plan.sizes == {
        "target": 16 * 3 * 128 * 128 * 4,
        "source": 16 * 512 * 4,
        "output": 16 * 3 * 128 * 128 * 2,
    }
    assert plan.max_shapes["source"] == (16, 512)
    assert plan.total >= sum(plan.sizes.values())
    # a dynamic spatial output takes the shape the context reports at max input shapes
    det = [TensorLayout("loc", "FLOAT", (-1, -1, 4), False)]
    assert plan_buffers(det, 4, {"loc": (4, 16800, 4)}).sizes["loc"] == 4 * 16800 * 4 * 4


def test_profile_shapes_and_strings() -> None:
    prof = BatchProfile(1, 4, 16)
    shapes = profile_shapes([("input_1", [None, 3, 192, 192])], prof)
    assert shapes["input_1"] == ((1, 3, 192, 192), (4, 3, 192, 192), (16, 3, 192, 192))
    with pytest.raises(ValueError, match="--shape input"):
        profile_shapes([("input", ["N", 3, None, None])], prof)
    fixed = profile_shapes([("input", ["N", 3, None, None])], prof, {"input": (1, 3, 640, 640)})
    assert fixed["input"][2] == (16, 3, 640, 640)
    assert shape_string({"a": (1, 3, 8, 8), "b": (1, 512)}) == "a:1x3x8x8,b:1x512"
    assert parse_shape_arg("input:1x3x640x640") == ("input", (1, 3, 640, 640))
    with pytest.raises(ValueError):
        parse_shape_arg("1x3")
    with pytest.raises(ValueError):
        parse_shape_arg("a:1x0")


def test_profile_spans_every_configured_shape_of_an_input() -> None:
    """The detector runs 320x320 at warm-up and 320x192 for 16:9: a profile fixed to one rejects the other."""
    from engines.processors.face_detector import canvas_for, detector_input_shapes

    prof = BatchProfile(1, 4, 16)
    given = detector_input_shapes(320, 640)
    shapes = profile_shapes([("input", ["N", 3, None, None])], prof, {"input": [s for _, s in given]})
    mn, opt, mx = shapes["input"]
    assert opt == (4, 3, 192, 320)  # the first given: 16:9 landscape, the common live shape
    for h, w in ((720, 1280), (480, 640), (320, 320), (1280, 720)):
        ch, cw = canvas_for(h, w, 320)
        assert mn[2] <= ch <= mx[2] and mn[3] <= cw <= mx[3], (h, w)
    assert mx == (16, 3, 640, 640)  # the source image is detected at 640
    with pytest.raises(ValueError, match="ranks"):
        profile_shapes([("input", ["N", 3, None, None])], prof, {"input": [(1, 3, 8, 8), (1, 3, 8)]})
