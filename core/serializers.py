"""Input building blocks shared by every app's API: ICA v1 rejects unknown fields and NULs."""

from rest_framework import serializers


class StrictSerializer(serializers.Serializer):
    """Refuses fields it does not declare, so a misspelled field is an error, not silently ignored."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({unknown[0]: ["Unknown field."]})
        return super().to_internal_value(data)


def reject_nul(value: str) -> str:
    if "\x00" in value:
        raise serializers.ValidationError("Must not contain NUL characters.")
    return value


class CleanTextField(serializers.CharField):
    """Text kept exactly as sent (no trimming), nonblank and NUL-free."""

    def __init__(self, **kwargs):
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)
        self.validators.append(reject_nul)

    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise serializers.ValidationError("Must be a string.")
        value = super().to_internal_value(data)
        if not value.strip():
            raise serializers.ValidationError("Must not be blank.")
        return value


class StrictBooleanField(serializers.BooleanField):
    """Only JSON true or false: DRF's own field would also take "yes", 1 and "on"."""

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            raise serializers.ValidationError("Must be true or false.")
        return data


class StrictIntegerField(serializers.IntegerField):
    """Only a JSON number that is whole: DRF's own field would also take the string "12" (and `true`, an int)."""

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int | float) or data != int(data):
            raise serializers.ValidationError("Must be a whole number.")
        return super().to_internal_value(int(data))


class StrictUUIDField(serializers.UUIDField):
    """Only a UUID string: DRF's own field would also turn a JSON number (or `false`, an int) into a UUID."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise serializers.ValidationError("Must be a UUID string.")
        return super().to_internal_value(data)


def validated(serializer_class, data) -> serializers.Serializer:
    """A bound serializer whose data passed validation; a failure is the ICA 400 `invalid_request`."""
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer
