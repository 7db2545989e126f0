"""The tool stack: the sources tools come from, the admission checks, the layers around a call, and the one builder (`stack.build_tool_stack`)."""
