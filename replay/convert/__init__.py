"""Other formats in and out: `files` picks a format by suffix and owns the files; vcrpy's YAML
and JSON (`vcrpy_yaml`, read by `safe_yaml`, which never builds Python objects), pydantic-ai's
serializer (`pydantic_ai`) and replay's own JSON export (`json_export`).
"""
