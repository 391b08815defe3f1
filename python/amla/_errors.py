"""amla's error message format, for the checks done in Python (config.hpp's throw_invalid)."""


def invalid(fn: str, arg: str, value: str, rule: str) -> str:
    """The message amla::invalid_argument carries: ``fn: argument 'arg' = value violates: rule``."""
    return f"{fn}: argument '{arg}' = {value} violates: {rule}"
