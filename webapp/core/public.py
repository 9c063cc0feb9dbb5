"""The one base of the API's answer models: built from a stored row (or a domain's dataclass) by attribute, never copied field by field."""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict


class PublicModel(BaseModel):
    """An API answer read from an object's attributes of the same names: `XPublic.of(row, field=derived, ...)`.

    `of(row)` is `model_validate(row, from_attributes=True)`; a keyword names a field whose value is not the
    attribute of that name (a derived one: a count, a link, a value blind grading hides) and gives it. The
    shared field types (webapp.web.api_schemas: Timestamp, Day) turn a stored datetime or date into the text
    the API has always answered, so a row's attributes validate as they are.
    """

    model_config = ConfigDict(from_attributes=True)

    @classmethod
    def of(cls, row: object, /, **extra: object) -> Self:
        """Return the answer of `row`: every field from the attribute of its name, except those given in `extra`."""
        if not extra:
            return cls.model_validate(row, from_attributes=True)
        unknown = extra.keys() - cls.model_fields.keys()
        if unknown:
            raise TypeError(f"{cls.__name__} has no field {', '.join(sorted(unknown))}")
        values = {
            info.alias or name: getattr(row, name)
            for name, info in cls.model_fields.items()
            if name not in extra and hasattr(row, name)
        }
        values.update({cls.model_fields[name].alias or name: value for name, value in extra.items()})
        return cls.model_validate(values, from_attributes=True)
