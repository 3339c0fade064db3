"""Detection labels: YOLO and COCO files become boxes in the model's input pixels."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from pydantic import TypeAdapter, ValidationError

from edgebuild.cache.digest import StatCache
from edgebuild.data.boxes import BoxTransform, coco_categories
from edgebuild.data.digest import dataset_digest
from edgebuild.data.loaders import Samples, load_dataset
from edgebuild.data.records import coco_file
from edgebuild.errors import DataError, RecipeError
from edgebuild.fidelity.detection import Detections, load_truth, truth_metrics
from edgebuild.fidelity.outputs import save_outputs
from edgebuild.recipe.datasets import DatasetSpec
from edgebuild.recipe.loader import load_recipe

FIXTURE = Path(__file__).parent / "fixtures" / "photo-faces.coco.json"
REPO = Path(__file__).parents[2]


def spec(**fields: object) -> DatasetSpec:
    parsed: DatasetSpec = TypeAdapter(DatasetSpec).validate_python(fields)
    return parsed


def photos(tmp_path: Path, sizes: dict[str, tuple[int, int]]) -> Path:
    folder = tmp_path / "images"
    folder.mkdir()
    for name, size in sizes.items():
        Image.new("RGB", size, (90, 120, 150)).save(folder / name)
    return folder


def yolo(tmp_path: Path, files: dict[str, str]) -> Path:
    folder = tmp_path / "labels"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def boxes_of(samples: Samples) -> list[np.ndarray]:
    assert samples.boxes is not None
    return [b.boxes for b in samples.boxes]


def test_yolo_boxes_follow_the_letterbox(tmp_path: Path) -> None:
    # 200×100 photo into 64×64: scale 0.32 -> 64×32, padded 16 rows above.
    photos(tmp_path, {"a.png": (200, 100), "b.png": (100, 100)})
    yolo(tmp_path, {"a.txt": "0 0.5 0.5 0.2 0.4\n3 0.1 0.1 0.2 0.2\n"})
    ds = spec(kind="images", path="images", labels={"format": "yolo", "path": "labels"},
              preprocess={"letterbox": [64, 64], "dtype": "uint8", "layout": "NHWC"})
    samples = load_dataset(ds, tmp_path, ["image"])
    assert samples.boxes is not None and samples.labels is None
    a, b = samples.boxes
    # photo box (80, 30, 120, 70) -> ×0.32, + (0, 16)
    assert np.allclose(a.boxes, [[25.6, 25.6, 38.4, 38.4], [0.0, 16.0, 12.8, 22.4]])
    assert a.classes.tolist() == [0, 3]
    assert b.boxes.shape == (0, 4) and b.classes.shape == (0,)  # no file: no objects


def test_resize_and_centre_crop_move_and_clip_boxes(tmp_path: Path) -> None:
    # 200×100 -> resize 50 -> 100×50 -> crop 50 from x = 25.
    photos(tmp_path, {"a.png": (200, 100)})
    yolo(tmp_path, {"a.txt": "0 0.5 0.5 0.2 0.4\n1 0.05 0.5 0.1 0.2\n2 0.2 0.5 0.2 0.2\n"})
    ds = spec(kind="images", path="images", labels={"format": "yolo", "path": "labels"},
              preprocess={"resize": 50, "center_crop": 50})
    (box,) = load_dataset(ds, tmp_path, ["image"]).boxes or []
    # the second box lies left of the crop (dropped); the third is clipped at x = 0
    assert np.allclose(box.boxes, [[15, 15, 35, 35], [0, 20, 5, 30]])
    assert box.classes.tolist() == [0, 2]


def test_transform_composes_like_the_pixels() -> None:
    step = BoxTransform(1, 1, 0, 0, 10, 10).then(0.5, 0.5, 3, 4, 20, 20).then(1, 1, -1, -1, 8, 8)
    out, classes = step.apply(np.array([[2.0, 2.0, 6.0, 6.0]]), np.array([5]))
    assert np.allclose(out, [[3, 4, 5, 6]]) and classes.tolist() == [5]


def test_empty_label_file_and_comment_lines(tmp_path: Path) -> None:
    photos(tmp_path, {"a.png": (10, 10), "b.png": (10, 10)})
    yolo(tmp_path, {"a.txt": "", "b.txt": "# a face\n\n0 0.5 0.5 1 1\n", "classes.txt": "face\n"})
    ds = spec(kind="images", path="images", labels={"format": "yolo", "path": "labels"})
    a, b = boxes_of(load_dataset(ds, tmp_path, ["image"]))
    assert a.shape == (0, 4)
    assert np.allclose(b, [[0, 0, 10, 10]])


@pytest.mark.parametrize(("line", "wanted"), [
    ("0 0.5 0.5 0.2", "a.txt:2: 4 values"),
    ("face 0.5 0.5 0.2 0.2", "a.txt:2: class 'face': Input should be a valid integer"),
    ("0 0.5 0.5 1.5 0.2", "a.txt:2: w '1.5': Input should be less than or equal to 1"),
    ("0 0.5 0.5 0 0.2", "a.txt:2: w '0': Input should be greater than 0"),
    ("-1 0.5 0.5 0.2 0.2", "a.txt:2: class '-1': Input should be greater than or equal to 0"),
    # Used to escape as OverflowError (a class wider than int64) and pass as inf.
    ("99999999999999999999999999 0.5 0.5 0.2 0.2", "class '99999999999999999999999999': "
     "Input should be less than or equal to 2147483647"),
    ("0 1e400 0.5 0.2 0.2", "cx '1e400': Input should be a finite number"),
    ("0 nan 0.5 0.2 0.2", "cx 'nan': Input should be a finite number"),
])
def test_bad_yolo_line_names_file_and_line(tmp_path: Path, line: str, wanted: str) -> None:
    photos(tmp_path, {"a.png": (10, 10)})
    yolo(tmp_path, {"a.txt": f"0 0.5 0.5 0.2 0.2\n{line}\n"})
    ds = spec(kind="images", path="images", labels={"format": "yolo", "path": "labels"})
    with pytest.raises(DataError, match="dataset 'dataset': ") as info:
        load_dataset(ds, tmp_path, ["image"])
    assert wanted in info.value.message
    assert "class cx cy w h" in info.value.hint


def test_yolo_file_that_is_not_text_is_named(tmp_path: Path) -> None:
    photos(tmp_path, {"a.png": (10, 10)})
    labels = yolo(tmp_path, {})
    (labels / "a.txt").write_bytes(b"0 0.5 0.5 0.2 0.2\n\xff\xfe\n")
    ds = spec(kind="images", path="images", labels={"format": "yolo", "path": "labels"})
    with pytest.raises(DataError, match=r"a\.txt is not UTF-8 text"):
        load_dataset(ds, tmp_path, ["image"])


def test_yolo_folder_that_names_no_image_is_an_error(tmp_path: Path) -> None:
    photos(tmp_path, {"a.png": (10, 10)})
    yolo(tmp_path, {"A.txt": "0 0.5 0.5 0.2 0.2\n"})
    ds = spec(kind="images", path="images", labels={"format": "yolo", "path": "labels"})
    with pytest.raises(DataError, match="no YOLO label file") as info:
        load_dataset(ds, tmp_path, ["image"])
    assert "images/a.png -> labels/a.txt" in info.value.hint
    missing = spec(kind="images", path="images", labels={"format": "yolo", "path": "nope"})
    with pytest.raises(DataError, match="does not exist"):
        load_dataset(missing, tmp_path, ["image"])


def test_coco_category_ids_become_contiguous_in_id_order() -> None:
    document = coco_file(json.dumps({
        "images": [], "annotations": [], "categories": [
            {"id": 90, "name": "toothbrush"}, {"id": 1, "name": "person"},
            {"id": 7, "name": "train"}]}).encode(), "c.json")
    assert coco_categories(document.categories) == {1: 0, 7: 1, 90: 2}
    with pytest.raises(DataError, match="repeat"):
        coco_categories(coco_file(b'{"images": [], "annotations": [], "categories": '
                                  b'[{"id": 1}, {"id": 1}]}', "c.json").categories)


def coco(tmp_path: Path, annotations: list[dict[str, object]], width: int = 40) -> Path:
    path = tmp_path / "instances.json"
    path.write_text(json.dumps({
        "images": [{"id": 10, "file_name": "a.png", "width": width, "height": 20},
                   {"id": 11, "file_name": "b.png", "width": 40, "height": 20}],
        "categories": [{"id": 18, "name": "dog"}, {"id": 3, "name": "car"}],
        "annotations": annotations}))
    return path


def test_coco_boxes_classes_crowds_and_unlisted_images(tmp_path: Path) -> None:
    photos(tmp_path, {"a.png": (40, 20), "b.png": (40, 20), "c.png": (40, 20)})
    coco(tmp_path, [
        {"image_id": 10, "category_id": 18, "bbox": [4, 2, 10, 6]},
        {"image_id": 10, "category_id": 3, "bbox": [20, 10, 8, 4], "iscrowd": 0},
        {"image_id": 10, "category_id": 3, "bbox": [0, 0, 40, 20], "iscrowd": 1},
    ])
    ds = spec(kind="images", path="images",
              labels={"format": "coco", "path": "instances.json"})
    samples = load_dataset(ds, tmp_path, ["image"])
    assert samples.boxes is not None
    a, b, c = samples.boxes
    assert np.allclose(a.boxes, [[4, 2, 14, 8], [20, 10, 28, 14]])  # the crowd left out
    assert a.classes.tolist() == [1, 0]  # dog (id 18) -> 1, car (id 3) -> 0
    assert len(b.classes) == 0 and len(c.classes) == 0  # listed without boxes; unlisted


def test_coco_mistakes_are_named(tmp_path: Path) -> None:
    photos(tmp_path, {"a.png": (40, 20)})
    ds = spec(kind="images", path="images",
              labels={"format": "coco", "path": "instances.json"})
    coco(tmp_path, [{"image_id": 10, "category_id": 5, "bbox": [0, 0, 1, 1]}])
    with pytest.raises(DataError, match=r"annotations\[0\] has category_id 5"):
        load_dataset(ds, tmp_path, ["image"])
    coco(tmp_path, [{"image_id": 10, "category_id": 3, "bbox": [0, 0, 1]}])
    with pytest.raises(DataError, match=r"annotations\[0\].bbox \[0, 0, 1\]"):
        load_dataset(ds, tmp_path, ["image"])
    coco(tmp_path, [], width=80)
    with pytest.raises(DataError, match=r"a\.png is declared 80×20, the file is 40×20"):
        load_dataset(ds, tmp_path, ["image"])
    (tmp_path / "instances.json").write_text("{}")
    with pytest.raises(DataError, match="not a COCO file"):
        load_dataset(ds, tmp_path, ["image"])


HOSTILE_COCO = {
    # name: (document text, message, hint) -- each used to escape as a raw exception, or
    # to be accepted (NaN, Infinity, booleans, a width written as a string).
    "image not an object": (
        '{"images": [1], "annotations": [], "categories": []}',
        "images[0] 1: Input should be an object", ""),  # AttributeError: 'int' ... 'get'
    "category not an object": (
        '{"images": [], "annotations": [], "categories": [7]}',
        "categories[0] 7: Input should be an object", ""),
    "annotation not an object": (
        '{"images": [], "annotations": [[1]], "categories": []}',
        "annotations[0] [1]: Input should be an object", ""),
    "category_id a list": (  # TypeError: unhashable type: 'list'
        '{"images": [], "categories": [{"id": 1}], "annotations": '
        '[{"image_id": 10, "category_id": [1], "bbox": [0, 0, 1, 1]}]}',
        "annotations[0].category_id [1]: Input should be a valid integer", "integers"),
    "image id a list": (
        '{"images": [{"id": [10], "file_name": "a.png"}], "annotations": [], '
        '"categories": []}', "images[0].id [10]: Input should be a valid integer", "integers"),
    "deeply nested": (  # RecursionError
        '{"images": [], "annotations": [], "categories": [], "info": '
        + "[" * 100_000 + "]" * 100_000 + "}",
        "instances.json is not JSON: recursion limit exceeded at line 1", "200 levels"),
    "NaN": (
        '{"images": [], "categories": [{"id": 3}], "annotations": '
        '[{"image_id": 10, "category_id": 3, "bbox": [NaN, 0, 1, 1]}]}',
        "annotations[0].bbox[0] nan: Input should be a finite number", "[x, y, width, height]"),
    "Infinity": (
        '{"images": [], "categories": [{"id": 3}], "annotations": '
        '[{"image_id": 10, "category_id": 3, "bbox": [0, 0, Infinity, 1]}]}',
        "annotations[0].bbox[2] inf: Input should be a finite number", "four finite numbers"),
    "boolean": (
        '{"images": [], "categories": [{"id": 3}], "annotations": '
        '[{"image_id": 10, "category_id": 3, "bbox": [true, 0, 1, 1]}]}',
        "annotations[0].bbox[0] True: Input should be a valid number", "four finite numbers"),
    "huge number": (  # OverflowError: int too large to convert to float
        '{"images": [], "categories": [{"id": 3}], "annotations": '
        '[{"image_id": 10, "category_id": 3, "bbox": [1' + "0" * 400 + ', 0, 1, 1]}]}',
        "annotations[0].bbox[0] 1000000000", "four finite numbers"),
    "width as a string": (  # said "declared 40×20, the file is 40×20"
        '{"images": [{"id": 10, "file_name": "a.png", "width": "40", "height": 20}], '
        '"annotations": [], "categories": []}',
        "images[0].width '40': Input should be a valid integer", 'not "512"'),
    "negative extent": (
        '{"images": [], "categories": [{"id": 3}], "annotations": '
        '[{"image_id": 10, "category_id": 3, "bbox": [0, 0, -1, 1]}]}',
        "annotations[0].bbox [0, 0, -1, 1]: width and height must be >= 0",
        "[x, y, width, height]"),
    "repeated image id": (
        '{"images": [{"id": 1, "file_name": "a.png"}, {"id": 1, "file_name": "b.png"}], '
        '"annotations": [], "categories": []}',
        "images[1].id 1 is used by an earlier image", "its own id"),
}


@pytest.mark.parametrize("case", list(HOSTILE_COCO))
def test_hostile_coco_file_is_a_named_data_error(tmp_path: Path, case: str) -> None:
    text, message, hint = HOSTILE_COCO[case]
    photos(tmp_path, {"a.png": (40, 20)})
    (tmp_path / "instances.json").write_text(text)
    ds = spec(kind="images", path="images",
              labels={"format": "coco", "path": "instances.json"})
    with pytest.raises(DataError) as info:
        load_dataset(ds, tmp_path, ["image"], "photos")
    assert info.value.message.startswith("dataset 'photos': instances.json")
    assert message in info.value.message and hint in info.value.hint
    assert len(info.value.message) < 400  # a 100,000-bracket value is not echoed


@pytest.mark.skipif(importlib.util.find_spec("skimage") is None, reason="needs scikit-image")
def test_the_recipe_faces_read_the_same_as_yolo_and_as_coco(tmp_path: Path) -> None:
    """recipes/data/photo-faces and its COCO twin give the same boxes on the real photos."""
    common = {"kind": "images", "path": {"package": "skimage", "path": "data"},
              "patterns": ["astronaut.png", "camera.png", "coffee.png"],
              "preprocess": {"letterbox": [128, 128], "dtype": "uint8", "layout": "NHWC"}}
    from_yolo = load_dataset(spec(**common, labels={
        "format": "yolo", "path": str(REPO / "recipes/data/photo-faces")}), tmp_path, ["image"])
    from_coco = load_dataset(spec(**common, labels={"format": "coco", "path": str(FIXTURE)}),
                             tmp_path, ["image"])
    assert from_yolo.names == ["astronaut.png", "camera.png", "coffee.png"]
    for y, c in zip(boxes_of(from_yolo), boxes_of(from_coco), strict=True):
        assert np.allclose(y, c, atol=1e-3)
    astronaut, camera, coffee = boxes_of(from_yolo)
    assert np.allclose(astronaut, [[45, 18, 67, 43.5]], atol=1e-3)  # 512 -> 128: ×0.25
    assert np.allclose(camera, [[47.5, 31.5, 63.5, 50.5]], atol=1e-3)
    assert coffee.shape == (0, 4)


def test_digest_covers_the_label_files(tmp_path: Path) -> None:
    photos(tmp_path, {"a.png": (10, 10)})
    labels = yolo(tmp_path, {"a.txt": "0 0.5 0.5 0.2 0.2\n"})
    ds = spec(kind="images", path="images", labels={"format": "yolo", "path": "labels"})
    before = dataset_digest(ds, tmp_path, StatCache(tmp_path / "stats.json"))
    (labels / "a.txt").write_text("0 0.5 0.5 0.3 0.2\n")
    edited = dataset_digest(ds, tmp_path, StatCache(tmp_path / "stats.json"))
    (labels / "b.txt").write_text("")
    added = dataset_digest(ds, tmp_path, StatCache(tmp_path / "stats.json"))
    plain = dataset_digest(spec(kind="images", path="images"), tmp_path,
                           StatCache(tmp_path / "stats.json"))
    assert len({before, edited, added, plain}) == 4


def test_labels_schema_rejects_unknown_formats_and_keys() -> None:
    with pytest.raises(ValidationError, match="yolo"):
        spec(kind="images", path="x", labels={"format": "voc", "path": "l"})
    with pytest.raises(ValidationError, match="Extra inputs"):
        spec(kind="images", path="x", labels={"format": "yolo", "path": "l", "dir": "m"})
    with pytest.raises(ValidationError):
        spec(kind="images", path="x", labels="boxes")


def test_truth_round_trips_through_the_outputs_file_and_scores_maps(tmp_path: Path) -> None:
    from edgebuild.core.samples import ImageBoxes

    truth = [ImageBoxes(np.array([[0.0, 0, 10, 10], [20, 20, 30, 30]]), np.array([0, 0])),
             ImageBoxes.empty()]
    samples = Samples({"x": np.zeros((2, 1))}, None, ["a", "b"], truth)
    save_outputs(tmp_path / "o.npz", [{"y": np.zeros((1, 1))}] * 2, samples)
    loaded = load_truth(tmp_path / "o.npz")
    assert loaded is not None and [len(t.scores) for t in loaded] == [2, 0]
    assert np.allclose(loaded[0].boxes, truth[0].boxes)
    one = np.ones(1)
    # The build finds one face well, and fires once on the empty image (a false positive
    # ranked first); FP32 finds both.
    got = [Detections(np.array([[1.0, 1, 10, 10]]), np.array([0.8]), np.zeros(1)),
           Detections(np.array([[0.0, 0, 5, 5]]), np.array([0.9]), np.zeros(1))]
    ref = [Detections(np.array([[0.0, 0, 10, 10], [20, 20, 30, 31]]), np.array([0.9, 0.8]),
                      np.zeros(2)), Detections(np.zeros((0, 4)), np.zeros(0), np.zeros(0))]
    m = truth_metrics(got, ref, loaded, 0.5)
    assert m["labelled_boxes"] == 2 and m["recall_labels"] == 50
    assert m["map50_labels"] == pytest.approx(25.0)  # precision 1/2 at recall 1/2
    assert m["reference_map50_labels"] == 100 and m["map50_labels_drop"] == pytest.approx(75)
    # Labels without a box are the data's mistake (exit 2), not a failed gate (exit 1).
    with pytest.raises(DataError, match="hold no box on any of its 2 images"):
        truth_metrics(got, ref, [Detections(np.zeros((0, 4)), one[:0], one[:0])] * 2, 0.5)


RECIPE = """\
name: demo
model: {onnx: m.onnx}
inputs:
  - {name: x, shape: [1, 8, 8, 3], dtype: uint8}
outputs: [boxes, scores]
datasets:
  photos:
    kind: images
    path: images
    LABELS
    preprocess: {letterbox: [8, 8], dtype: uint8, layout: NHWC}
targets:
  host-cpu:
    gates:
      accuracy: {dataset: photos, task: detection, boxes: boxes, scores: scores,
                 min_map50_labels: 30, labels_iou_threshold: 0.3}
"""


def problems_of(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "r.yaml"
    path.write_text(text)
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    return [str(p) for p in info.value.problems]


def test_labelled_box_limit_needs_labels_on_the_dataset(tmp_path: Path) -> None:
    (tmp_path / "m.onnx").write_bytes(b"")
    text = RECIPE.replace("    LABELS\n", "")
    first, second = problems_of(tmp_path, text)
    assert "r.yaml:15:" in first and "min_map50_labels" in first
    assert "dataset 'photos' has none" in first and "format: yolo" in first
    assert "r.yaml:15:" in second and "labels_iou_threshold" in second
    path = tmp_path / "ok.yaml"
    path.write_text(RECIPE.replace("LABELS", "labels: {format: yolo, path: labels}"))
    load_recipe(path)  # declared: valid (files are read only when the data loads)


def test_bad_labels_declaration_names_line_and_key(tmp_path: Path) -> None:
    (problem,) = problems_of(tmp_path, RECIPE.replace(
        "LABELS", "labels: {format: yolo, path: labels, kind: txt}"))
    assert "r.yaml:10:" in problem and "unknown key 'kind'" in problem
    (problem,) = problems_of(tmp_path, RECIPE.replace(
        "LABELS", "labels: {format: voc, path: labels}"))
    assert "r.yaml:10:" in problem and "datasets.photos.labels" in problem


def test_labelled_box_keys_are_for_detection_gates(tmp_path: Path) -> None:
    text = RECIPE.replace("LABELS", "labels: {format: yolo, path: labels}").replace(
        "task: detection, boxes: boxes, scores: scores,", "output: boxes, task: regression,")
    (problem,) = problems_of(tmp_path, text.replace("min_map50_labels: 30", "min_cosine: 0.9"))
    assert "labels_iou_threshold are for detection outputs" in problem
