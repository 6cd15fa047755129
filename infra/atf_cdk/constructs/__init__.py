"""One construct per concern; the stack wires them together."""
