"""Infrastructure without HTTP: settings, the database, the spec, security primitives, shared helpers."""
