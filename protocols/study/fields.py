"""The field types of the study document, shared by its parts (``schema`` and the judged measure's ``panel``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints

RATER_PREFIX = "rater_"
LABEL = r"^[A-Za-z][A-Za-z0-9_.-]*$"  # hypothesis, measure and prediction ids
ROLE = r"^[a-z][a-z0-9_]*$"
Label = Annotated[str, StringConstraints(pattern=LABEL)]
Text = Annotated[str, StringConstraints(min_length=1)]
RoleName = Annotated[str, StringConstraints(pattern=ROLE)]
ArgValue = str | int | float | bool


class Strict(BaseModel):
    """A part of the document: unknown fields refused, frozen once read."""

    model_config = ConfigDict(extra="forbid", frozen=True)
