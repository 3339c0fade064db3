"""Label records as typed values: what a YOLO line or a COCO file may hold, with bounds.

Label files come from outside (a data-only pull request can change them), so each
record is validated before a value is used: strict types (`"512"` is not a width,
`true` is not a coordinate), finite numbers (no NaN or Infinity), integers that fit
the arrays they go into, and a JSON nesting limit (pydantic's parser stops at 200
levels, where `json.loads` raised RecursionError). One `DataError` names the file,
the line (YOLO, or the JSON syntax error) or the key path (`annotations[3].bbox[0]`),
and the value.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from edgebuild.errors import DataError

MAX_CLASS = 2**31 - 1  # a class index fits an int32 everywhere it goes
MAX_ID = 2**63 - 1  # COCO ids are int64
MAX_PIXELS = 1_000_000  # an image side; a box coordinate may lie 10× outside it
MAX_COORD = 10.0 * MAX_PIXELS
SHOWN = 5  # problems listed in one message

ClassIndex = Annotated[int, Field(ge=0, le=MAX_CLASS)]
CocoId = Annotated[int, Field(ge=0, le=MAX_ID)]
Pixels = Annotated[int, Field(ge=1, le=MAX_PIXELS)]
Coordinate = Annotated[float, Field(allow_inf_nan=False, ge=-MAX_COORD, le=MAX_COORD)]
Extent = Annotated[float, Field(allow_inf_nan=False, ge=0, le=MAX_COORD)]
Fraction = Annotated[float, Field(allow_inf_nan=False, ge=0, le=1)]
PositiveFraction = Annotated[float, Field(allow_inf_nan=False, gt=0, le=1)]

YOLO_HINT = ("a YOLO box line is `class cx cy w h`: an integer class from 0, then the box's "
             "centre and size as fractions of the image's width and height (0..1), w and h "
             "above 0")
COCO_HINTS = {
    "bbox": "a COCO bbox is [x, y, width, height] in pixels: four finite numbers, width and "
            "height >= 0",
    "width": "an image's width and height are whole pixels, written as numbers (512, not "
             "\"512\")",
    "id": "COCO ids are integers from 0",
    "file_name": "file_name is the image's path relative to its folder",
}
COCO_HINTS["height"] = COCO_HINTS["width"]
COCO_HINTS["image_id"] = COCO_HINTS["category_id"] = COCO_HINTS["id"]


class YoloBox(BaseModel):
    """One line of a YOLO label file, parsed from its text fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cls: ClassIndex
    cx: Fraction
    cy: Fraction
    w: PositiveFraction
    h: PositiveFraction


class _Coco(BaseModel):
    # Strict: JSON's own types only, so a string is never read as a number; unknown keys
    # (area, segmentation, licenses, …) are left alone.
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class CocoImage(_Coco):
    id: CocoId
    file_name: str = Field(min_length=1, max_length=4096)
    width: Pixels | None = None
    height: Pixels | None = None


class CocoAnnotation(_Coco):
    image_id: CocoId
    category_id: CocoId
    bbox: list[Coordinate] = Field(min_length=4, max_length=4)
    iscrowd: int = Field(0, ge=0, le=1)

    @field_validator("bbox")
    @classmethod
    def _extent(cls, bbox: list[float]) -> list[float]:
        if bbox[2] < 0 or bbox[3] < 0:
            raise ValueError("width and height must be >= 0")
        return bbox


class CocoCategory(_Coco):
    id: CocoId


class CocoFile(_Coco):
    images: list[CocoImage]
    annotations: list[CocoAnnotation]
    categories: list[CocoCategory]


def yolo_box(fields: list[str], where: str) -> YoloBox:
    """The box of one YOLO line's five fields; DataError at `file:line` otherwise."""
    try:
        return YoloBox.model_validate(dict(zip(YoloBox.model_fields, fields, strict=True)))
    except ValidationError as exc:
        raise DataError(f"{where}: {_problems(exc, names={'cls': 'class'})}",
                        YOLO_HINT) from None


def coco_file(data: bytes, name: str) -> CocoFile:
    """A COCO document from its bytes; DataError naming the key path or JSON position."""
    try:
        return CocoFile.model_validate_json(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        if errors and errors[0]["type"] == "json_invalid":
            why = errors[0]["msg"].removeprefix("Invalid JSON: ")
            raise DataError(f"{name} is not JSON: {why}",
                            "a COCO label file is one JSON object (nested at most 200 "
                            "levels)") from None
        if any(e["loc"] == () or (len(e["loc"]) == 1 and e["type"] in ("missing", "list_type"))
               for e in errors):
            raise DataError(f"{name} is not a COCO file: it needs the lists `images`, "
                            "`annotations` and `categories`") from None
        field = next((str(p) for p in reversed(errors[0]["loc"]) if isinstance(p, str)), "")
        raise DataError(f"{name}: {_problems(exc)}", COCO_HINTS.get(field, "")) from None


def _problems(exc: ValidationError, names: dict[str, str] | None = None) -> str:
    """`annotations[3].bbox[0] nan: Input should be a finite number`, for the first few."""
    errors = exc.errors(include_url=False)
    shown = [f"{_path(e['loc'], names or {})} {_value(e.get('input'))}: "
             f"{e['msg'].removeprefix('Value error, ')}" for e in errors[:SHOWN]]
    more = f"; … and {len(errors) - SHOWN} more" if len(errors) > SHOWN else ""
    return "; ".join(shown) + more


def _path(loc: tuple[int | str, ...], names: dict[str, str]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else \
            (("." if text else "") + names.get(part, part))
    return text


def _value(value: Any) -> str:
    """A short, printable form of the offending value (label files can hold anything)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
