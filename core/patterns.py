"""Regex pieces for the OpenAPI schema that mean the same to Python's `re` and to ECMA-262 engines.

The server decides blankness and splits fields with `str.isspace()`; ECMA's `\\s`, which schema tools use,
is a different set (it lacks U+0085 and U+001C–U+001F and has U+FEFF). Listing Python's set keeps the schema's
rule and the server's rule the same rule.
"""

# Every character str.isspace() accepts lies in the Basic Multilingual Plane, so \uXXXX escapes cover them all.
_PYTHON_WHITESPACE = "".join(f"\\u{code:04x}" for code in range(0x10000) if chr(code).isspace())

WHITESPACE = f"[{_PYTHON_WHITESPACE}]"
NOT_WHITESPACE = f"[^{_PYTHON_WHITESPACE}]"
NOT_WHITESPACE_NOR_NUL = f"[^\\u0000{_PYTHON_WHITESPACE}]"
