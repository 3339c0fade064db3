"""The run report (one pydantic model) and its renderers."""
