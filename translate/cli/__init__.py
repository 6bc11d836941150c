"""Command-line entry points: thin wrappers that parse arguments, call the library and print."""
